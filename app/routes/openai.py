"""OpenAI-compatible endpoints: /v1/chat/completions, /v1/completions, /v1/models."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from app.engine.request import GenerationRequest, RequestError
from app.responder import respond
from app.responses import ChatShape, TextShape
from app.schemas import ChatCompletionRequest, CompletionRequest, GenerationFields
from app.services import Services, ServicesDep
from mm.token_sequence import TokenSequence

router = APIRouter(prefix="/v1")


def _generation(
    body: GenerationFields, prompt: TokenSequence, services: Services
) -> GenerationRequest:
    return GenerationRequest(
        prompt=prompt,
        sampling=body.sampling(services.settings.seed),
        max_tokens=body.token_limit(),
        stop=body.stop_list(),
        ignore_eos=body.ignore_eos,
        cache_prompt=body.cache_prompt,
        cache_salt=body.cache_salt,
        id_slot=body.id_slot,
        logprobs=body.logprobs_n(),
    )


@router.post("/chat/completions")
async def chat_completions(body: ChatCompletionRequest, http: Request, services: ServicesDep):
    if any(m.has_images() for m in body.messages):
        raise RequestError(
            "image input needs a multimodal projector: start the server with --mmproj",
            param="messages",
        )
    messages = [m.for_template() for m in body.messages]
    prompt = services.prompter.chat(messages)
    request = _generation(body, prompt, services)
    request.continuation = services.prompter.continuation
    return await respond(services.engine, request, body, ChatShape, services.model_name, http)


@router.post("/completions")
async def completions(body: CompletionRequest, http: Request, services: ServicesDep):
    try:
        prompt = services.prompter.text_prompt(body.single_prompt())
    except ValueError as e:
        raise RequestError(str(e), param="prompt") from e
    request = _generation(body, prompt, services)
    return await respond(services.engine, request, body, TextShape, services.model_name, http)


@router.get("/models")
async def models(services: ServicesDep):
    model = services.engine.model
    return {
        "object": "list",
        "data": [
            {
                "id": services.model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "kvchat",
                "meta": {
                    "n_ctx": model.n_ctx,
                    "n_ctx_train": model.n_ctx_train,
                    "n_vocab": model.n_vocab,
                    "n_slots": model.n_seq_max,
                },
            }
        ],
    }
