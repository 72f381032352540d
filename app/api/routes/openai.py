"""OpenAI-compatible endpoints: /v1/chat/completions, /v1/completions, /v1/models."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Header, Request

from app.api.responder import Reply, respond
from app.api.responses import ChatShape, TextShape
from app.api.routes.documents import rag_sources, with_citations
from app.api.schemas import ChatCompletionRequest, CompletionRequest
from app.api.services import ServicesDep
from app.chat.images import image_prompt
from app.chat.messages import ChatMessage
from app.chat.turn import TurnResult
from app.engine.request import RequestError, no_projector
from mm.token_sequence import TokenSequence

router = APIRouter(prefix="/v1")


@router.post("/chat/completions")
async def chat_completions(
    body: ChatCompletionRequest,
    http: Request,
    services: ServicesDep,
    x_session_id: str | None = Header(default=None, max_length=128),
):
    prompter, turns, salt = services.prompter, services.turns, body.cache_salt
    on_end = []
    citations, documents = None, frozenset()
    if body.rag is not None:
        if any(m.has_images() for m in body.messages):
            raise RequestError("rag takes text messages only", param="rag")
        question = body.messages[-1].text()
        part, citations = await rag_sources(services, http, body.rag, question, set())
        documents = frozenset(c["document_id"] for c in citations)
        last = ChatMessage(role="user", content=[part, {"type": "text", "text": question}])
        body.messages = [*body.messages[:-1], last]
    if any(m.has_images() for m in body.messages):
        vision = services.engine.vision
        if vision is None:
            raise no_projector("messages")
        prompt, images = await asyncio.to_thread(
            image_prompt, prompter, vision, body.messages, services.settings, services.media
        )
        request = body.generation(prompt, services.settings.seed)
        request.images = images
    else:
        text = prompter.render([m.for_template() for m in body.messages])
        # Earlier replies keep the ids the model generated for them (see app/chat/turn_cache.py).
        known = turns.longest(salt, text)
        tokens = (
            prompter.extend(known[1], known[0], text)
            if known
            else list(prompter.tokenize(text).tokens)
        )
        request = body.generation(TokenSequence(tokens), services.settings.seed)

        def remember(result: TurnResult) -> None:
            if result.status == "complete" and prompter.matches(result.tokens, result.text):
                turns.remember(salt, text + result.text, [*tokens, *result.tokens])

        on_end.append(remember)
    request.continuation = prompter.continuation
    request.session = body.session_id or x_session_id
    request.documents = documents
    reply = Reply(ChatShape, "chat", on_end)
    if citations is not None:
        reply.prelude = {"citations": citations}
        reply.reshape = with_citations(citations)
    return await respond(services, request, body, reply, http)


@router.post("/completions")
async def completions(body: CompletionRequest, http: Request, services: ServicesDep):
    try:
        prompt = services.prompter.text_prompt(body.single_prompt())
    except ValueError as e:
        raise RequestError(str(e), param="prompt") from e
    request = body.generation(prompt, services.settings.seed)
    return await respond(services, request, body, Reply(TextShape, "completion"), http)


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
