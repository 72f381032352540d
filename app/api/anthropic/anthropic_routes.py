"""`POST /v1/messages`: Anthropic's Messages API (as llama-server serves it), translated into
the chat turn every other chat route serves (app/api/anthropic/anthropic_schemas.py) and answered in
Anthropic's shapes (app/api/anthropic/anthropic_reply.py); `/v1/messages/count_tokens` counts that
turn's prompt. `x-api-key` is taken like `Authorization: Bearer` (app/api/middleware/auth.py);
errors come in Anthropic's shape (app/api/anthropic/anthropic_errors.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError

from app.api.anthropic.anthropic_errors import AnthropicErrorResponse
from app.api.anthropic.anthropic_reply import AnthropicWriter
from app.api.anthropic.anthropic_schemas import CountTokensRequest, MessagesRequest
from app.api.errors import ERROR_RESPONSES, STREAMING, conversion_error
from app.api.lookups import TenantDep
from app.api.middleware.auth import cache_salt
from app.api.openai.openai_schemas import ChatCompletionRequest
from app.api.openai.openai_shapes import ChatShape
from app.api.responder import Reply, respond
from app.api.services import ServicesDep
from app.api.structured_output import refuse_unsupported
from app.api.turn_reply import request_builder

router = APIRouter(prefix="/v1")

# The statuses every route documents, with Anthropic's error body.
ANTHROPIC_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {**doc, "model": AnthropicErrorResponse} for status, doc in ERROR_RESPONSES.items()
}


def _chat(body: MessagesRequest) -> ChatCompletionRequest:
    try:
        return body.chat_request()
    except ValidationError as e:
        raise conversion_error(e) from None


@router.post("/messages", responses={**ANTHROPIC_ERRORS, **STREAMING})
async def messages(body: MessagesRequest, http: Request, services: ServicesDep, tenant: TenantDep):
    chat = _chat(body)
    refuse_unsupported(chat)
    salt = cache_salt(http)
    build = request_builder(chat, services, salt, "messages")
    tools = chat.tool_specs()
    messages, end = chat.prompt_end()  # a last assistant message is a prefill, as Anthropic's
    turn = await services.chats.from_messages(
        messages, None, None, tenant, salt, build, tools=tools, end=end
    )
    known = {t.name for t in tools} if chat.calls_allowed() else set()
    model = body.model or services.model_name
    writer = AnthropicWriter(model, known, len(turn.request.prompt))
    reply = Reply(ChatShape, "messages", turn.on_end, writer=writer)
    return await respond(services, turn.request, chat, reply, http)


@router.post("/messages/count_tokens", responses=ANTHROPIC_ERRORS)
async def count_tokens(
    body: CountTokensRequest, http: Request, services: ServicesDep, tenant: TenantDep
):
    """The prompt tokens a Messages request would have, tools included; nothing generated."""
    chat = _chat(body)
    salt = cache_salt(http)
    build = request_builder(chat, services, salt, "messages")
    messages, end = chat.prompt_end()
    n = await services.chats.count_prompt(messages, tenant, salt, build, chat.tool_specs(), end)
    return {"input_tokens": n}
