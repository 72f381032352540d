"""OpenAI-compatible endpoints: /v1/chat/completions, /v1/completions, /v1/models; as
llama-server, each but /v1/completions also without /v1, and /chat/completions/input_tokens."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from app.api.errors import STREAMING
from app.api.lookups import TenantDep
from app.api.middleware.auth import cache_salt
from app.api.openai.openai_schemas import ChatCompletionRequest, CompletionRequest
from app.api.openai.openai_shapes import TextShape
from app.api.responder import Reply, respond
from app.api.services import Services, ServicesDep
from app.api.structured_output import finish_request, refuse_unsupported
from app.api.turn_reply import reply_turn, request_builder
from app.chat.chat_turn import Turn
from app.chat.sessions.session_lookup import check_session
from app.engine.request import RequestError

# Each route also without /v1, as llama-server serves them (left out of the schema).
router = APIRouter()


@router.post("/v1/chat/completions", responses=STREAMING)
@router.post("/chat/completions", responses=STREAMING, include_in_schema=False)
async def chat_completions(
    body: ChatCompletionRequest,
    http: Request,
    services: ServicesDep,
    tenant: TenantDep,
    x_session_id: str | None = Header(default=None, max_length=128),
):
    refuse_unsupported(body)
    session = body.session_id or x_session_id
    if session is not None:
        await check_session(services.store, session, tenant)
    if body.n > 1 and body.stream:
        raise RequestError("n > 1 is answered unstreamed: send stream false", param="n")
    turn = await _chat_turn(body, http, services, tenant, session)
    verbose = services.settings.verbose if body.verbose is None else body.verbose
    if body.n == 1:
        return await reply_turn(services, turn, body, http, verbose)
    # As llama-server: every choice is a generation of its own, queued at once; the first
    # reply carries the others' choices, and the first that fails is the answer. The prompt,
    # its images and the grammar are made once for all of them.
    replies = await asyncio.gather(
        *(reply_turn(services, turn.another(), body, http, verbose) for _ in range(body.n))
    )
    failed = next((r for r in replies if r.status_code != 200), None)
    if failed is not None:
        return failed
    wholes = [json.loads(bytes(r.body)) for r in replies]  # type: ignore[union-attr]
    wholes[0]["choices"] = [{**w["choices"][0], "index": i} for i, w in enumerate(wholes)]
    return JSONResponse(wholes[0])


async def _chat_turn(
    body: ChatCompletionRequest,
    http: Request,
    services: Services,
    tenant: str,
    session: str | None,
) -> Turn:
    salt = cache_salt(http, body.cache_salt)
    build = request_builder(body, services, salt, "messages")
    messages, end = body.prompt_end()
    tools, reasoning = body.tool_specs(), body.reasoning_ask()
    return await services.chats.from_messages(
        messages, body.rag, session, tenant, salt, build, tools, reasoning, end
    )


@router.post("/v1/chat/completions/input_tokens")
@router.post("/chat/completions/input_tokens", include_in_schema=False)
async def input_tokens(
    body: ChatCompletionRequest, http: Request, services: ServicesDep, tenant: TenantDep
):
    """How many prompt tokens the chat request would have, nothing generated (llama-server's)."""
    salt = cache_salt(http, body.cache_salt)
    build = request_builder(body, services, salt, "messages")
    messages, end = body.prompt_end()
    chats = services.chats
    n = await chats.count_prompt(messages, tenant, salt, build, body.tool_specs(), end)
    return {"object": "response.input_tokens", "input_tokens": n}


# Not /completions: llama-server serves its native completion there
# (app/api/llama_server/completion_routes.py).
@router.post("/v1/completions", responses=STREAMING)
async def completions(body: CompletionRequest, http: Request, services: ServicesDep):
    refuse_unsupported(body)
    try:
        prompt = await asyncio.to_thread(services.prompter.text_prompt, body.single_prompt())
    except ValueError as e:
        raise RequestError(str(e), param="prompt") from e
    request = body.generation(prompt, services.settings.seed)
    salt = cache_salt(http, body.cache_salt)
    await finish_request(request, body, salt, "prompt", services)
    return await respond(services, request, body, Reply(TextShape, "completion"), http)


def _tags(services: Services) -> list[str]:
    tags = services.settings.tags or ""
    return [t.strip() for t in tags.split(",") if t.strip()]


def _model(services: Services) -> dict[str, Any]:
    info = services.engine.model_info()
    return {
        "id": services.model_name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "kvchat",
        "aliases": services.settings.model_aliases() or [services.model_name],
        "tags": _tags(services),
        "meta": {
            "n_ctx": info.n_ctx,
            "n_ctx_train": info.n_ctx_train,
            "n_vocab": info.n_vocab,
            "n_slots": info.n_slots,
            "n_ctx_request": info.n_ctx_request,
        },
    }


@router.get("/v1/models")
@router.get("/models", include_in_schema=False)
async def models(services: ServicesDep):
    # llama-server's `models` list (Ollama's shape) beside OpenAI's `data`.
    name = services.model_name
    listed = {"name": name, "model": name, "type": "model", "tags": _tags(services)}
    return {"object": "list", "models": [listed], "data": [_model(services)]}


@router.get("/v1/models/{model_id:path}")
@router.get("/models/{model_id:path}", include_in_schema=False)
async def model(model_id: str, services: ServicesDep):
    """OpenAI's models.retrieve: this server serves one model, under its name."""
    if model_id not in (services.model_name, *services.settings.model_aliases()):
        raise RequestError(
            f"model {model_id!r} does not exist; this server serves {services.model_name!r}",
            param="model",
            code="model_not_found",
            status=404,
        )
    return _model(services)
