"""Session turns: a new message to a session, or the last one answered again (regenerate).

Each turn's prompt is built from the stored history with the replies' own generated ids
(app/chat/conversation.py), so it extends the previous turn token for token and the whole history
is reused from the KV; the session goes back to the slot that holds it (slot affinity).
Nothing is lost: the user message is stored before generation, the reply when it ends, with
status complete, cancelled or error (also when the client goes away or the server stops).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request

from app.api.auth import cache_salt, tenant_of
from app.api.errors import STREAMING
from app.api.responder import Reply, respond
from app.api.responses import ChatShape
from app.api.routes.search import rag_blend, rag_sources, with_citations
from app.api.routes.sessions import load_session, session_not_found
from app.api.services import Services, ServicesDep
from app.api.session_schemas import RegenerateRequest, SessionMessageRequest
from app.api.structured_output import finish_request, refuse_unsupported
from app.chat.session_history import history, history_prompt, store_images, visible_uploads
from app.chat.turn import TurnResult
from app.db.records import SessionRecord
from app.docs.chat_sources import cited_before
from app.engine.request import RequestError, no_projector

router = APIRouter(prefix="/v1/sessions")


@router.post("/{session_id}/messages", responses=STREAMING)
async def add_message(
    session_id: str, body: SessionMessageRequest, http: Request, services: ServicesDep
):
    session = await load_session(services, session_id, tenant_of(http))
    return await _turn(session, body, http, services)


@router.post("/{session_id}/regenerate", responses=STREAMING)
async def regenerate(
    session_id: str, body: RegenerateRequest, http: Request, services: ServicesDep
):
    """Answer the last user message again: its turn (the message and its reply) is replaced by
    the new one in the same transaction as the message is stored again."""
    session = await load_session(services, session_id, tenant_of(http))
    last = next((m for m in reversed(session.messages) if m.role == "user"), None)
    if last is None:
        raise RequestError("the session has no user message to answer", param="session_id")
    fields = {**body.model_dump(exclude_unset=True), "content": last.content}
    session.messages = [m for m in session.messages if m.seq < last.seq]
    message = SessionMessageRequest.model_validate(fields)
    return await _turn(session, message, http, services, replace_from=last.seq)


async def _turn(
    session: SessionRecord,
    body: SessionMessageRequest,
    http: Request,
    services: Services,
    replace_from: int | None = None,
):
    """Store the user message (replacing the messages from `replace_from` on), generate the
    reply and store it when it ends."""
    refuse_unsupported(body)
    tenant = tenant_of(http)
    if not body.text() and not body.has_images():
        raise RequestError("the message is empty", param="content")
    # The session's defaults, then this request's own fields.
    fields = SessionMessageRequest.model_validate(
        {**session.sampling, **body.model_dump(exclude_unset=True)}
    )
    content = body.model_dump()["content"]  # plain str or list of dicts for the database
    citations, documents = None, frozenset()
    if body.rag is not None:
        if body.has_images():
            raise RequestError("rag takes text messages only", param="rag")
        seen, before = cited_before([m.content for m in session.messages if m.role == "user"])
        part, citations = await rag_sources(services, http, body.rag, body.text(), seen)
        # The KV of the whole history holds every document cited in it.
        documents = frozenset(before | {c["document_id"] for c in citations})
        content = [part, {"type": "text", "text": body.text()}]
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
        documents=documents,
    )
    await finish_request(request, fields, cache_salt(http, fields.cache_salt), "content")
    if body.rag is not None:
        await rag_blend(services, http, body.rag, citations or [], request)
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
        user = await asyncio.to_thread(
            store.add_message, session.id, "user", content, replace_from=replace_from
        )
    except KeyError:  # deleted meanwhile
        services.busy_sessions.discard(session.id)
        raise session_not_found(session.id) from None
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
    if citations is not None:
        reply.prelude = {"citations": citations}
        reply.reshape = with_citations(citations)
    try:
        return await respond(services, request, fields, reply, http)
    except RequestError:
        # Refused before generation (queue full, shutting down): as if never sent. Once the
        # request is submitted, the end hooks record whatever happens to it.
        services.busy_sessions.discard(session.id)
        await asyncio.to_thread(store.delete_message, user.id)
        raise
