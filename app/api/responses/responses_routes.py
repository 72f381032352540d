"""The OpenAI Responses API on top of sessions: `POST /v1/responses`, `GET` and `DELETE
/v1/responses/{id}`.

A stored response (`store`, the default) is a session turn (app/chat/sessions/response_sessions.py):
a new conversation is a new session; `previous_response_id` continues its conversation on the slot
that holds it, so the prompt is the cached prefix and `usage.input_tokens_details.cached_tokens`
says so. `store: false` without a previous response is a stateless chat turn.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError

from app.api.errors import STREAMING, conversion_error, openapi_links
from app.api.lookups import TenantDep
from app.api.middleware.auth import cache_salt
from app.api.middleware.idempotent_writes import ticket_of
from app.api.openai.openai_schemas import ChatCompletionRequest
from app.api.openai.openai_shapes import ChatShape
from app.api.responder import Reply, respond
from app.api.responses.responses_reply import (
    ResponseHead,
    ResponsesWriter,
    call_item,
    message_item,
    outcome,
    response_object,
    response_usage,
)
from app.api.responses.responses_schemas import ResponsesRequest, input_messages
from app.api.services import ServicesDep
from app.api.structured_output import refuse_unsupported
from app.api.turn_reply import request_builder
from app.chat.chat_turn import Turn
from app.chat.messages import ChatMessage
from app.chat.sessions.response_sessions import ResponseInput
from app.chat.sessions.stored_responses import StoredResponse
from app.chat.sessions.stored_responses import response_id as make_response_id
from app.chat.tools import ReplyParser, ToolCall
from app.db.records import SessionRecord
from app.engine.request import RequestError

# The generating routes also without /v1, as llama-server serves them (left out of the schema).
router = APIRouter()


async def _stored_response(
    response_id: str, tenant: TenantDep, services: ServicesDep
) -> tuple[SessionRecord, StoredResponse]:
    return await services.responses.find(tenant, response_id)


StoredDep = Annotated[tuple[SessionRecord, StoredResponse], Depends(_stored_response)]


def _chat(body: ResponsesRequest) -> ChatCompletionRequest:
    try:
        return body.chat_request()
    except ValidationError as e:
        raise conversion_error(e) from None


def _system(body: ResponsesRequest, systems: list[str]) -> str:
    """The system text: the instructions, then the input's system items."""
    return "\n\n".join([*([body.instructions] if body.instructions else []), *systems])


def _stateless(body: ResponsesRequest) -> tuple[str, list[ChatMessage]]:
    """A request's own conversation: the system text (instructions and system items) and the
    messages, that system text first."""
    systems, new = input_messages(body.items())
    system = _system(body, systems)
    return system, [*([ChatMessage(role="system", content=system)] if system else []), *new]


def _echo(body: ResponsesRequest) -> dict[str, Any]:
    return {
        "max_output_tokens": body.max_output_tokens,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "parallel_tool_calls": body.parallel_tool_calls,
        "tool_choice": body.tool_choice or ("auto" if body.tools else "none"),
        "tools": [t.model_dump(exclude_none=True) for t in body.tools or []],
        "store": body.store,
        "metadata": body.metadata or {},
        "text": {
            "format": (
                body.text.format.model_dump(by_alias=True, exclude_none=True)
                if body.text and body.text.format
                else {"type": "text"}
            )
        },
    }


RESPONSE_LINKS = openapi_links(
    "response_id",
    {
        "GetResponse": "get_response_v1_responses__response_id__get",
        "DeleteResponse": "delete_response_v1_responses__response_id__delete",
    },
)


@router.post("/v1/responses", responses={200: {**STREAMING[200], "links": RESPONSE_LINKS}})
@router.post("/responses", include_in_schema=False)
async def create_response(
    body: ResponsesRequest, http: Request, services: ServicesDep, tenant: TenantDep
):
    chat = _chat(body)
    refuse_unsupported(chat)
    tools = chat.tool_specs()
    parser = ReplyParser({t.name for t in tools} if chat.calls_allowed() else set())
    systems, new = input_messages(body.items())
    build = request_builder(chat, services, cache_salt(http), "input")
    model = body.model or services.model_name
    turn: Turn
    if not body.store and body.previous_response_id is None:
        system, messages = _stateless(body)
        turn = await services.chats.from_messages(
            messages, None, None, tenant, cache_salt(http), build, tools=tools
        )
        head = ResponseHead("resp_" + uuid.uuid4().hex, model, None, system or None)
    else:
        system = _system(body, systems) or None
        ask = ResponseInput(body.previous_response_id, system, new, tools, parser)
        started = await services.responses.start(ask, tenant, build, ticket_of(http))
        turn = started.turn
        head = ResponseHead(started.id, model, started.previous, started.system)
    head.echo = _echo(body)
    head.timings_per_token, head.return_progress = body.timings_per_token, body.return_progress
    if body.stream and (body.timings_per_token or body.return_progress):
        turn.request.timings_per_token = True  # the engine's timings on each text delta
    reply = Reply(ChatShape, "responses", turn.on_end, writer=ResponsesWriter(head, parser))
    try:
        return await respond(services, turn.request, chat, reply, http)
    except RequestError:
        if turn.undo is not None:  # refused before generation: as if never sent
            await turn.undo()
        raise


@router.post("/v1/responses/input_tokens")
@router.post("/responses/input_tokens", include_in_schema=False)
async def input_tokens(
    body: ResponsesRequest, http: Request, services: ServicesDep, tenant: TenantDep
):
    """The prompt tokens a response to this request would start from, instructions and tools
    included (llama-server's); nothing is generated or stored."""
    if body.previous_response_id is not None:
        raise RequestError(
            "input_tokens counts a request's own input: leave previous_response_id out",
            param="previous_response_id",
        )
    chat = _chat(body)
    salt = cache_salt(http)
    build = request_builder(chat, services, salt, "input")
    _, messages = _stateless(body)
    n = await services.chats.count_prompt(messages, tenant, salt, build, chat.tool_specs())
    return {"object": "response.input_tokens", "input_tokens": n}


@router.get("/v1/responses/{response_id}")
async def get_response(response_id: str, stored: StoredDep, services: ServicesDep):
    session, found = stored
    previous = None
    if found.previous is not None:
        previous = make_response_id(session.id, found.previous)
    first = found.inputs[0]
    head = ResponseHead(
        response_id,
        services.model_name,
        previous,
        session.system_prompt,
        created_at=int(first.created_at.timestamp()),
    )
    reply = found.reply
    if reply is None:
        return response_object(head, "in_progress", [], None)
    content = reply.content if isinstance(reply.content, str) else ""
    calls = [ToolCall(c["id"], c["name"], c["arguments"]) for c in reply.tool_calls or []]
    output = [message_item(head, content)] if content or not calls else []
    output += [call_item(c) for c in calls]
    usage = response_usage(
        reply.prompt_tokens or 0, reply.cached_tokens or 0, reply.completion_tokens or 0
    )
    if reply.status == "error":
        error = {"code": "server_error", "message": reply.error or "generation failed"}
        return response_object(head, "failed", output, usage, error=error)
    status, reason = outcome(reply.finish_reason)
    return response_object(head, status, output, usage, reason)


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, stored: StoredDep, services: ServicesDep):
    """The response and what followed it in its conversation (later responses built on it)."""
    await services.responses.delete(*stored)
    return {"id": response_id, "object": "response", "deleted": True}
