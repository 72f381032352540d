"""Sessions: conversations the server keeps, so a client sends only the new message.

Each turn's prompt is built from the stored history with the replies' own generated ids
(app/chat/conversation.py), so it extends the previous turn token for token and the whole history
is reused from the KV; the session goes back to the slot that holds it (slot affinity).
Nothing is lost: the user message is stored before generation, the reply when it ends, with
status complete, cancelled or error (also when the client goes away or the server stops).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.auth import cache_salt, tenant_of
from app.api.errors import STREAMING, openapi_links
from app.api.responder import Reply, respond
from app.api.responses import ChatShape
from app.api.schemas import CreateSessionRequest, SessionMessageRequest
from app.api.services import Services, ServicesDep
from app.api.structured_output import finish_request, refuse_unsupported
from app.chat.session_history import history, history_prompt, store_images, visible_uploads
from app.chat.turn import TurnResult
from app.db.records import MessageRecord, SessionRecord
from app.engine.request import RequestError, no_projector

router = APIRouter(prefix="/v1/sessions")


def _message_json(m: MessageRecord) -> dict[str, Any]:
    return {
        "id": m.id,
        "seq": m.seq,
        "role": m.role,
        "content": m.content,
        "status": m.status,
        "finish_reason": m.finish_reason,
        "error": m.error,
        "usage": None
        if m.prompt_tokens is None
        else {
            "prompt_tokens": m.prompt_tokens,
            "completion_tokens": m.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": m.cached_tokens},
        },
        "timings": m.timings,
        "created_at": m.created_at.isoformat(),
    }


def _session_json(s: SessionRecord, with_messages: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": s.id,
        "object": "session",
        "title": s.title,
        "system_prompt": s.system_prompt,
        "sampling": s.sampling,
        "n_messages": s.n_messages,
        "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(),
    }
    if with_messages:
        out["messages"] = [_message_json(m) for m in s.messages]
    return out


_SESSION_ID = re.compile(r"[0-9a-f]{32}")


def _not_found(session_id: str) -> RequestError:
    return RequestError(
        f"session {session_id!r} does not exist", param="session_id", code="not_found", status=404
    )


async def _load(services: Services, session_id: str, tenant: str) -> SessionRecord:
    """The tenant's session; another tenant's is "not found", never "forbidden"."""
    if not _SESSION_ID.fullmatch(session_id):  # never a valid id: no need to ask the database
        raise _not_found(session_id)
    session = await asyncio.to_thread(services.store.get_session, session_id, True, tenant)
    if session is None:
        raise _not_found(session_id)
    return session


SESSION_LINKS = openapi_links(
    "session_id",
    {
        "GetSession": "get_session_v1_sessions__session_id__get",
        "AddMessage": "add_message_v1_sessions__session_id__messages_post",
        "DeleteSession": "delete_session_v1_sessions__session_id__delete",
    },
)


@router.post("", status_code=201, responses={201: {"links": SESSION_LINKS}})
async def create_session(body: CreateSessionRequest, http: Request, services: ServicesDep):
    s = await asyncio.to_thread(
        services.store.create_session,
        body.system_prompt,
        body.sampling,
        body.title,
        tenant_of(http),
    )
    return JSONResponse(_session_json(s, with_messages=True), status_code=201)


@router.get("")
async def list_sessions(http: Request, services: ServicesDep, limit: int = 100, offset: int = 0):
    if not 1 <= limit <= 1000:
        raise RequestError("limit must be between 1 and 1000", param="limit")
    if offset < 0:
        raise RequestError("offset must be 0 or more", param="offset")
    store = services.store
    found = await asyncio.to_thread(store.list_sessions, limit, offset, tenant_of(http))
    return {"object": "list", "data": [_session_json(s, with_messages=False) for s in found]}


@router.get("/{session_id}")
async def get_session(session_id: str, http: Request, services: ServicesDep):
    return _session_json(await _load(services, session_id, tenant_of(http)), with_messages=True)


@router.delete("/{session_id}")
async def delete_session(session_id: str, http: Request, services: ServicesDep):
    """The session, its messages, and the media that nothing else uses any more."""
    if _SESSION_ID.fullmatch(session_id) is None:
        raise _not_found(session_id)
    store, media = services.store, services.media
    found, freed = await asyncio.to_thread(
        store.delete_session_and_media, session_id, tenant_of(http)
    )
    if not found:
        raise _not_found(session_id)
    if freed and media is not None:
        await asyncio.to_thread(media.remove_files, freed)
    return {"id": session_id, "object": "session.deleted", "deleted": True}


@router.post("/{session_id}/messages", responses=STREAMING)
async def add_message(
    session_id: str, body: SessionMessageRequest, http: Request, services: ServicesDep
):
    refuse_unsupported(body)
    tenant = tenant_of(http)
    session = await _load(services, session_id, tenant)
    if not body.text() and not body.has_images():
        raise RequestError("the message is empty", param="content")
    # The session's defaults, then this request's own fields.
    fields = SessionMessageRequest.model_validate(
        {**session.sampling, **body.model_dump(exclude_unset=True)}
    )
    content = body.model_dump()["content"]  # plain str or list of dicts for the database
    vision = services.engine.vision
    if body.has_images():
        if vision is None or services.media is None:
            raise no_projector("content")
        media = services.media
        # Uploaded images the new message names must be the tenant's; inline ones are stored
        # now. The stored history is the tenant's own session: its images need no check.
        await asyncio.to_thread(visible_uploads, content, media, tenant)
        content = await asyncio.to_thread(store_images, content, media, services.settings)
    turn = history(session, content)
    prompt, images = await history_prompt(
        turn, services.prompter, vision, services.settings, services.media
    )
    request = fields.generation(
        prompt,
        services.settings.seed,
        session=session.id,
        continuation=services.prompter.continuation,
        images=images,
    )
    await finish_request(request, fields, cache_salt(http, fields.cache_salt), "content")
    services.engine.validate(request)  # bad input changes nothing: checked before storing
    services.engine.check_room()  # nor does a full queue (the common case; submit checks again)
    if session.id in services.busy_sessions:
        raise RequestError(
            "this session is already generating a reply; wait for it or cancel it first",
            param="session_id",
            code="session_busy",
            status=409,
        )
    store = services.store
    services.busy_sessions.add(session.id)
    try:
        user = await asyncio.to_thread(store.add_message, session.id, "user", content)
    except KeyError:  # deleted meanwhile
        services.busy_sessions.discard(session.id)
        raise _not_found(session.id) from None
    except BaseException:
        services.busy_sessions.discard(session.id)
        raise

    def store_reply(result: TurnResult) -> None:
        done, failed = result.finished, result.failed
        exact = result.status != "error" and services.prompter.matches(result.tokens, result.text)
        store.add_message(
            session.id,
            "assistant",
            result.text,
            status=result.status,
            token_ids=result.tokens if exact else None,
            prompt_tokens=len(prompt),
            cached_tokens=done.cached_tokens if done else None,
            completion_tokens=done.completion_tokens if done else len(result.tokens),
            timings=done.timings.as_dict() if done else None,
            finish_reason=done.finish_reason if done else None,
            error=failed.message if failed else None,
        )

    def release(_: TurnResult) -> None:
        services.busy_sessions.discard(session.id)

    reply = Reply(ChatShape, "session", [store_reply, release], {"session_id": session.id})
    try:
        return await respond(services, request, fields, reply, http)
    except RequestError:
        # Refused before generation (queue full, shutting down): as if never sent. Once the
        # request is submitted, the end hooks record whatever happens to it.
        services.busy_sessions.discard(session.id)
        await asyncio.to_thread(store.delete_message, user.id)
        raise
