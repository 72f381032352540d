"""llama-server's native completion endpoint: POST /completion, and /completions, which
llama-server serves as the same endpoint (OpenAI's text completions are /v1/completions, in
app/api/openai/openai_routes.py). Errors come in llama-server's shape
(app/api/llama_server/native_errors.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.api.errors import ERROR_RESPONSES, STREAMING
from app.api.llama_server.native_completion import NativeHead, NativeWriter
from app.api.llama_server.native_errors import NativeErrorResponse
from app.api.llama_server.native_schemas import JsonPrompt, NativeCompletionRequest, Prompt
from app.api.middleware.auth import cache_salt
from app.api.openai.openai_shapes import TextShape
from app.api.responder import Reply, respond
from app.api.services import Services, ServicesDep
from app.api.structured_output import finish_request, refuse_unsupported
from app.engine.request import RequestError
from mm.token_sequence import TokenSequence

router = APIRouter()

# The statuses every route documents, with llama-server's error body.
NATIVE_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {**doc, "model": NativeErrorResponse} for status, doc in ERROR_RESPONSES.items()
}


def _prompt(services: Services, prompt: Prompt) -> tuple[TokenSequence, str]:
    """The prompt's tokens, and its text as the reply's `prompt` says it. Worker thread."""
    if isinstance(prompt, JsonPrompt):
        if prompt.multimodal_data:
            # As llama-server without a projector; with one, images go through the chat routes.
            raise ValueError(
                "multimodal_data is not supported in a completion prompt: send images to "
                "/v1/chat/completions"
            )
        prompt = prompt.prompt_string
    tokens = services.prompter.text_prompt(prompt)
    if isinstance(prompt, str):
        return tokens, prompt
    vocab = services.engine.tokenizer
    # Ids outside the vocabulary are refused with the request; they have no text.
    known = [t for t in tokens.text_tokens() if 0 <= t < vocab.n_vocab]
    return tokens, vocab.detokenize(known)


@router.post("/completion", responses={**NATIVE_ERRORS, **STREAMING})
@router.post("/completions", responses={**NATIVE_ERRORS, **STREAMING}, include_in_schema=False)
async def completion(body: NativeCompletionRequest, http: Request, services: ServicesDep):
    refuse_unsupported(body)
    prompts = body.prompts()
    limit = services.settings.max_prompts
    if len(prompts) > limit:
        raise RequestError(
            f"prompt: the request has {len(prompts)} prompts; this server takes at most {limit}"
            " in one request (--max-prompts): send the others in requests of their own",
            param="prompt",
        )
    if len(prompts) == 1:
        return await _complete(services, body, prompts[0], 0, http)
    if body.stream:
        raise RequestError(
            "a list of prompts is answered unstreamed: send stream false, or each prompt in a "
            "request of its own",
            param="stream",
        )
    # As llama-server: every prompt is queued at once, and the results come as a list in
    # the prompts' order, each with its `index`; the first that fails is the answer. Their
    # grammar is made once (GenerationFields.once).
    replies = await asyncio.gather(
        *(_complete(services, body, p, i, http) for i, p in enumerate(prompts)),
        return_exceptions=True,
    )
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
        if reply.status_code != 200:
            return reply
    return JSONResponse([json.loads(bytes(r.body)) for r in replies])  # type: ignore[union-attr]


async def _complete(
    services: Services, body: NativeCompletionRequest, prompt: Prompt, index: int, http: Request
) -> Response:
    try:
        tokens, text = await asyncio.to_thread(_prompt, services, prompt)
    except ValueError as e:
        raise RequestError(str(e), param="prompt") from e
    seed, settings, vocab = services.settings.seed, services.settings, services.engine.tokenizer
    # A streamed delta carries the timings so far: its slot, the prompt's progress, and the
    # timings of `timings_per_token`.
    request = body.generation(
        tokens, seed, timings_per_token=body.stream, post_sampling=body.post_sampling_probs
    )
    salt = cache_salt(http, body.cache_salt)
    await finish_request(request, body, salt, "prompt", services)
    head = NativeHead(
        model=services.model_name,
        prompt=text,
        n_prompt=len(tokens),
        # The biases as the request has them by now: by token, off the event loop.
        settings=body.settings(
            seed, settings.n_predict, settings.temperature, vocab, request.sampling.logit_bias
        ),
        n_probs=body.n_probs,
        post_sampling=body.post_sampling_probs,
        return_tokens=body.return_tokens,
        timings_per_token=body.timings_per_token,
        return_progress=body.return_progress,
        stream=body.stream,
        index=index,
    )
    reply = Reply(TextShape, "completion", writer=NativeWriter(head))
    return await respond(services, request, body, reply, http)
