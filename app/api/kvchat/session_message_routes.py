"""Session turns: a new message to a session, or the last one answered again (regenerate).

The turn is built by app/chat/chat_turn.py (the stored history as the prompt, the user message
stored before generation, the reply when it ends) and answered by app/api/turn_reply.py.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.errors import STREAMING
from app.api.kvchat.session_schemas import RegenerateRequest, SessionMessageRequest
from app.api.lookups import SessionDep
from app.api.services import ServicesDep
from app.api.turn_reply import session_turn
from app.chat.sessions.stored_replies import own_words, rewind

router = APIRouter(prefix="/v1/sessions")


@router.post("/{session_id}/messages", responses=STREAMING)
async def add_message(
    session: SessionDep, body: SessionMessageRequest, http: Request, services: ServicesDep
):
    return await session_turn(services, session, body, http)


@router.post("/{session_id}/regenerate", responses=STREAMING)
async def regenerate(
    session: SessionDep, body: RegenerateRequest, http: Request, services: ServicesDep
):
    """Answer the last user message again: its turn (the message and its reply) is replaced by
    the new one in the same transaction as the message is stored again. With `rag`, the user's
    own words are asked again with it (a `rag` turn's stored sources are found anew)."""
    last = rewind(session)
    content = last.content if body.rag is None else own_words(last)
    fields = {**body.model_dump(exclude_unset=True), "content": content}
    message = SessionMessageRequest.model_validate(fields)
    return await session_turn(services, session, message, http, replace_from=last.seq)
