"""The OpenAI Responses API on top of sessions: `POST /v1/responses`, `GET` and `DELETE
/v1/responses/{id}`.

A stored response (`store`, the default) is a session turn (app/chat/sessions/stored_turns.py): a
new conversation is a new session; `previous_response_id` continues its conversation on the slot
that holds it, so the prompt is the cached prefix and `usage.input_tokens_details.cached_tokens`
says so. Continuing a response that is not its conversation's latest branches the conversation there
(a fork: the same tokens, still served from the cache). `store: false` without a previous
response is a stateless chat turn. Tenants own their responses as they own sessions.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError

from app.api.errors import STREAMING, conversion_error, openapi_links
from app.api.lookups import TenantDep
from app.api.middleware.auth import cache_salt
from app.api.middleware.idempotent_writes import Ticket, ticket_of
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
from app.api.responses.responses_schemas import (
    ResponsesRequest,
    input_messages,
    parse_response_id,
)
from app.api.responses.responses_schemas import response_id as make_response_id
from app.api.services import Services, ServicesDep
from app.api.structured_output import refuse_unsupported
from app.api.turn_reply import request_builder
from app.chat.chat_turn import Turn
from app.chat.messages import ChatMessage
from app.chat.sessions.stored_responses import StoredResponse, find_response, is_latest
from app.chat.sessions.stored_turns import StoredTurns
from app.chat.tools import ReplyParser, ToolCall
from app.db.records import SessionRecord
from app.engine.request import RequestError

# The generating routes also without /v1, as llama-server serves them (left out of the schema).
router = APIRouter()


def _not_found(rid: str, param: str | None = None) -> RequestError:
    return RequestError(f"no response with id {rid!r}", param=param, code="not_found", status=404)


async def _find(
    services: Services, tenant: str, rid: str, param: str | None = None
) -> tuple[SessionRecord, StoredResponse]:
    parsed = parse_response_id(rid)
    if parsed is None:
        raise _not_found(rid, param)
    session = await asyncio.to_thread(services.store.get_session, parsed[0], True, tenant)
    found = find_response(session, parsed[1]) if session is not None else None
    if session is None or found is None:
        raise _not_found(rid, param)
    return session, found


async def _stored_response(
    response_id: str, tenant: TenantDep, services: ServicesDep
) -> tuple[SessionRecord, StoredResponse]:
    return await _find(services, tenant, response_id)


StoredDep = Annotated[tuple[SessionRecord, StoredResponse], Depends(_stored_response)]


def _chat(body: ResponsesRequest) -> ChatCompletionRequest:
    try:
        return body.chat_request()
    except ValidationError as e:
        raise conversion_error(e) from None


async def _conversation(
    services: Services,
    body: ResponsesRequest,
    systems: list[str],
    tenant: str,
    ticket: Ticket | None,
) -> tuple[SessionRecord, str | None]:
    """The session this response continues (or a new one) and the previous response's id; with
    an Idempotency-Key, a session made for it is noted (a retry after this replica died
    deletes it and begins again)."""
    store = services.store
    system = "\n\n".join([*([body.instructions] if body.instructions else []), *systems]) or None
    previous = body.previous_response_id
    if previous is None:
        created = await asyncio.to_thread(store.create_session, system, None, None, None, tenant)
        if ticket is not None:
            await ticket.note(created_session=created.id)
        return created, None
    session, found = await _find(services, tenant, previous, "previous_response_id")
    if found.reply is None:
        raise RequestError(
            f"response {previous!r} is still being generated; wait for it to end",
            param="previous_response_id",
            code="session_busy",
            status=409,
        )
    if not is_latest(session, found):  # a branch: the conversation up to that response
        fork = await asyncio.to_thread(store.fork_session, session.id, found.reply.seq + 1)
        assert fork is not None
        if ticket is not None:
            await ticket.note(created_session=fork.id)
        session = fork
    if system is not None and system != session.system_prompt:
        # New instructions apply from this turn on (the prompt then differs from its start).
        await asyncio.to_thread(store.update_session, session.id, system_prompt=system)
        session.system_prompt = system
    return session, previous


async def _undo_earlier_try(services: Services, ticket: Ticket | None) -> None:
    """A response taken over from a replica that died while it generated: what that try
    stored goes (the conversation it began, or the inputs it added), so it is stored once."""
    if ticket is None or not ticket.resumed:
        return
    store, noted = services.store, ticket.stored
    created, sid, begun = (noted.get(k) for k in ("created_session", "session_id", "from_seq"))
    if isinstance(created, str):
        await asyncio.to_thread(store.delete_session, created)
    if isinstance(sid, str) and sid != created and isinstance(begun, int):
        await asyncio.to_thread(store.delete_messages_from, sid, begun)


def _stateless(body: ResponsesRequest) -> tuple[str, list[ChatMessage]]:
    """A request's own conversation: the system text (instructions and system items) and the
    messages, that system text first."""
    systems, new = input_messages(body.items())
    system = "\n\n".join([*([body.instructions] if body.instructions else []), *systems])
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
    build = request_builder(chat, services.settings.seed, cache_salt(http), "input")
    model = body.model or services.model_name
    turn: Turn
    if not body.store and body.previous_response_id is None:
        system, messages = _stateless(body)
        turn = await services.chats.from_messages(
            messages, None, None, tenant, cache_salt(http), build, tools=tools
        )
        head = ResponseHead("resp_" + uuid.uuid4().hex, model, None, system or None)
    else:
        ticket = ticket_of(http)
        await _undo_earlier_try(services, ticket)
        session, previous = await _conversation(services, body, systems, tenant, ticket)
        if ticket is not None:  # before the inputs are stored
            begins = session.messages[-1].seq + 1 if session.messages else 0
            await ticket.note(session_id=session.id, from_seq=begins)
        try:
            stored = await StoredTurns(services.chats).turn(
                session, new, tools, parser, tenant, build
            )
        except BaseException:
            if previous is None:  # the conversation this request began: nothing of it is left
                await asyncio.to_thread(services.store.delete_session, session.id)
            raise
        turn = stored.turn
        rid = make_response_id(session.id, stored.inputs[-1].id)
        head = ResponseHead(rid, model, previous, session.system_prompt)
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
    build = request_builder(chat, services.settings.seed, salt, "input")
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
    session, found = stored
    if session.id in services.chats.busy:
        raise RequestError(
            "this conversation is generating a response; wait for it to end",
            code="session_busy",
            status=409,
        )
    store = services.store
    if found.inputs[0].seq == 0:
        await asyncio.to_thread(store.delete_session, session.id)
    else:
        await asyncio.to_thread(store.delete_messages_from, session.id, found.inputs[0].seq)
    return {"id": response_id, "object": "response", "deleted": True}
