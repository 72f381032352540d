"""Edits of a stored session: rename and settings, forking it at a message (a branch), and
cutting it back to a message (a deleted response).

A mixin of `Store` (it uses `Store._tx`); each method is one short transaction like the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any
from uuid import uuid4

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.media_rows import link_media
from app.db.models import Conversation, Message, utcnow
from app.db.records import SessionRecord, message_record, message_values, session_record

# update_session: "leave this field as it is" (None means "clear it").
UNCHANGED: Any = object()


class SessionEdits:
    def _tx(self, write: bool = False) -> AbstractContextManager[Session]:  # Store's
        raise NotImplementedError

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = UNCHANGED,
        system_prompt: str | None = UNCHANGED,
        sampling: dict[str, Any] = UNCHANGED,
        model: str | None = UNCHANGED,
    ) -> SessionRecord | None:
        """Change the given fields; None if the session does not exist. Messages stay as they
        are: a new system prompt applies from the next turn (whose prompt then differs from the
        cached one from its start, so that turn is evaluated afresh); so does a new model (the
        conversation's KV is per model: its next turn there is evaluated afresh)."""
        texts = (("title", title), ("system_prompt", system_prompt), ("model", model))
        for name, value in texts:
            if value is not UNCHANGED and value is not None and "\x00" in value:
                raise ValueError(f"{name} must be a string without NUL characters")
        if sampling is not UNCHANGED and not isinstance(sampling, dict):
            raise ValueError("sampling must be an object")
        with self._tx(write=True) as s:
            conv = s.get(Conversation, session_id)
            if conv is None:
                return None
            if title is not UNCHANGED:
                conv.title = title
            if system_prompt is not UNCHANGED:
                conv.system_prompt = system_prompt
            if sampling is not UNCHANGED:
                conv.sampling = dict(sampling)
            if model is not UNCHANGED:
                conv.model = model
            conv.updated_at = utcnow()
            return session_record(conv, _count(s, session_id))

    def fork_session(
        self, session_id: str, before_seq: int, title: str | None = None
    ) -> SessionRecord | None:
        """A new session with the same settings (its model too) and copies of the messages
        before `before_seq` (their reply token ids included, so the branch's prompts extend the
        same cached prefix); None if the source does not exist. The source is left unchanged."""
        with self._tx(write=True) as s:
            src = s.get(Conversation, session_id)
            if src is None:
                return None
            now = utcnow()
            conv = Conversation(
                id=uuid4().hex,
                tenant_id=src.tenant_id,  # a branch belongs to whoever owns the source
                title=title if title is not None else src.title,
                system_prompt=src.system_prompt,
                sampling=dict(src.sampling or {}),
                model=src.model,  # a branch goes on where its source was
                created_at=now,
                updated_at=now,
            )
            s.add(conv)
            copies = [_copy(m, conv.id) for m in _messages(s, session_id, before_seq)]
            s.add_all(copies)
            s.flush()
            for m in copies:  # the branch uses the same images: they count as used by it too
                link_media(s, m, conv.tenant_id)  # those its tenant sees: never another's
            return session_record(conv, len(copies), [message_record(m) for m in copies])

    def delete_messages_from(self, session_id: str, seq: int) -> int:
        """Delete the session's messages from `seq` on (a response and what followed it);
        how many went. Media stay until their session goes (they may be shared)."""
        with self._tx(write=True) as s:
            gone = delete(Message).where(Message.session_id == session_id, Message.seq >= seq)
            n = s.execute(gone).rowcount
            conv = s.get(Conversation, session_id)
            if conv is not None:
                conv.updated_at = utcnow()
            return n


def _count(s: Session, session_id: str) -> int:
    return len(s.scalars(select(Message.id).where(Message.session_id == session_id)).all())


def _messages(s: Session, session_id: str, before_seq: int) -> Iterator[Message]:
    query = (
        select(Message)
        .where(Message.session_id == session_id, Message.seq < before_seq)
        .order_by(Message.seq)
    )
    yield from s.scalars(query)


def _copy(m: Message, session_id: str) -> Message:
    return Message(session_id=session_id, **message_values(m))
