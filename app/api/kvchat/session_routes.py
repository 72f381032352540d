"""Sessions: conversations the server keeps, so a client sends only the new message.

This module holds the sessions themselves: create (or import), list, get, rename or change
settings, delete and fork, with their JSON. The tenant's session named by the path is looked up
by a dependency (app/api/lookups.py: 404 when the tenant has none).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.errors import openapi_links
from app.api.kvchat.session_schemas import (
    CreateSessionRequest,
    ForkSessionRequest,
    UpdateSessionRequest,
)
from app.api.lookups import SessionDep, TenantDep
from app.api.services import ServicesDep
from app.chat.sessions.session_lookup import session_not_found, valid_session_id
from app.db.media_rows import MediaNotVisible
from app.db.records import MessageRecord, SessionRecord
from app.db.session_edits import UNCHANGED
from app.engine.request import RequestError

router = APIRouter(prefix="/v1/sessions")


def _sources_of(m: MessageRecord | None) -> tuple[str, list[dict[str, Any]]] | None:
    """A `rag` turn's user message: (the user's own words, the citations of its sources).

    The sources are the text part the server put before the user's words, marked with its
    `citations` (app/docs/questions/chat_sources.py); the stored content is what the model saw and
    stays as it is (the next turn's prompt is rebuilt from it token for token)."""
    if m is None or m.role != "user" or not isinstance(m.content, list):
        return None
    parts = [p for p in m.content if isinstance(p, dict)]
    marked = [p["citations"] for p in parts if p.get("citations")]
    if not marked:
        return None
    own = "".join(p["text"] for p in parts if p.get("type") == "text" and not p.get("citations"))
    return own, marked[0]


def _message_json(m: MessageRecord, asked: MessageRecord | None = None) -> dict[str, Any]:
    """A stored message. A `rag` turn's user message also carries the user's own words
    (`question`) and its sources (`citations`) apart from its content; its reply carries the
    same citations, as the reply of `/v1/chat/completions` with `rag` does, and the `mode`
    that answered: `retrieval`, or `full` with the citations found from its answer."""
    out = {
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
    own = _sources_of(m)
    if own is not None:
        out["question"], out["citations"] = own
    asked_sources = _sources_of(asked) if m.role == "assistant" else None
    if m.citations is not None:  # a full-mode reply: the chunks found from its answer
        out["mode"], out["citations"] = "full", m.citations
    elif asked_sources is not None:
        out["mode"], out["citations"] = "retrieval", asked_sources[1]
    if m.tool_calls is not None:  # stored as the model made them; results answer by call id
        out["tool_calls"] = m.tool_calls
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.reasoning is not None:  # llama-server's name for a reply's thought
        out["reasoning_content"] = m.reasoning
    return out


def _session_json(s: SessionRecord, with_messages: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": s.id,
        "object": "session",
        "title": s.title,
        "system_prompt": s.system_prompt,
        "sampling": s.sampling,
        "model": s.model,
        "n_messages": s.n_messages,
        "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(),
    }
    if with_messages:
        messages = list(s.messages)
        out["messages"] = [
            _message_json(m, messages[i - 1] if i > 0 else None) for i, m in enumerate(messages)
        ]
    return out


SESSION_LINKS = openapi_links(
    "session_id",
    {
        "GetSession": "get_session_v1_sessions__session_id__get",
        "AddMessage": "add_message_v1_sessions__session_id__messages_post",
        "DeleteSession": "delete_session_v1_sessions__session_id__delete",
    },
)


@router.post("", status_code=201, responses={201: {"links": SESSION_LINKS}})
async def create_session(body: CreateSessionRequest, tenant: TenantDep, services: ServicesDep):
    imported = [(m.role, m.model_dump()["content"]) for m in body.messages]
    model = services.remembered_model(body.model)
    try:
        s = await asyncio.to_thread(
            services.store.create_session,
            body.system_prompt,
            body.sampling,
            body.title,
            imported,
            tenant,
            model,
        )
    except MediaNotVisible as e:  # another tenant's reads as unknown, as everywhere
        raise RequestError(
            f"messages[{e.index}]: no uploaded media with id {e.media_id!r}",
            param=f"messages.{e.index}.content",
        ) from None
    return JSONResponse(_session_json(s, with_messages=True), status_code=201)


@router.get("")
async def list_sessions(
    tenant: TenantDep, services: ServicesDep, limit: int = 100, offset: int = 0
):
    if not 1 <= limit <= 1000:
        raise RequestError("limit must be between 1 and 1000", param="limit")
    if offset < 0:
        raise RequestError("offset must be 0 or more", param="offset")
    store = services.store
    found = await asyncio.to_thread(store.list_sessions, limit, offset, tenant)
    return {"object": "list", "data": [_session_json(s, with_messages=False) for s in found]}


@router.get("/{session_id}")
async def get_session(session: SessionDep):
    return _session_json(session, with_messages=True)


@router.delete("/{session_id}")
async def delete_session(session_id: str, tenant: TenantDep, services: ServicesDep):
    """The session, its messages, and the media that nothing else uses any more."""
    if not valid_session_id(session_id):
        raise session_not_found(session_id)
    store, media = services.store, services.media
    found, freed = await asyncio.to_thread(store.delete_session_and_media, session_id, tenant)
    if not found:
        raise session_not_found(session_id)
    if freed and media is not None:
        await asyncio.to_thread(media.remove_files, freed)
    return {"id": session_id, "object": "session.deleted", "deleted": True}


@router.patch("/{session_id}")
async def update_session(session: SessionDep, body: UpdateSessionRequest, services: ServicesDep):
    session_id = session.id
    sent = body.model_fields_set
    changes = {
        k: getattr(body, k) if k in sent else UNCHANGED for k in UpdateSessionRequest.model_fields
    }
    if changes["sampling"] is None:  # null sampling: no defaults
        changes["sampling"] = {}
    if changes["model"] not in (None, UNCHANGED):  # moved to this server's model
        changes["model"] = services.remembered_model(changes["model"])
    s = await asyncio.to_thread(services.store.update_session, session_id, **changes)
    if s is None:
        raise session_not_found(session_id)
    return _session_json(s, with_messages=False)


def _context_tokens(m: MessageRecord) -> int:
    """Tokens of the conversation's KV after this message's turn: its prompt and reply."""
    return (m.prompt_tokens or 0) + (m.completion_tokens or 0)


@router.post("/{session_id}/fork", status_code=201)
async def fork_session(source: SessionDep, body: ForkSessionRequest, services: ServicesDep):
    """A branch: a new session with the messages before `message_id` (then send the edited text
    as its next message). `cache` says how much of the source's cached context the branch keeps
    (the prefix up to the fork point) and how much it gives up (everything after it)."""
    session_id = source.id
    at = next((m for m in source.messages if m.id == body.message_id), None)
    if at is None:
        raise RequestError(
            f"message {body.message_id} is not in session {session_id!r}",
            param="message_id",
            code="not_found",
            status=404,
        )
    measured = [m for m in source.messages if m.prompt_tokens is not None]
    before = [m for m in measured if m.seq < at.seq]
    total = _context_tokens(measured[-1]) if measured else 0
    kept = _context_tokens(before[-1]) if before else 0
    fork = await asyncio.to_thread(services.store.fork_session, session_id, at.seq, body.title)
    if fork is None:  # deleted meanwhile
        raise session_not_found(session_id)
    out = _session_json(fork, with_messages=True)
    out["forked_from"] = {"session_id": session_id, "message_id": at.id}
    out["cache"] = {"kept_tokens": kept, "given_up_tokens": max(0, total - kept)}
    return JSONResponse(out, status_code=201)
