"""Store: sessions, messages and media in SQLite or PostgreSQL.

Every method is synchronous (routes call them with asyncio.to_thread) and is one short
transaction, so a crash or `kill -9` at any point leaves either all of a change or none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any
from uuid import uuid4

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db.media_rows import MediaRows, check_text, link_media, unseen_media
from app.db.models import (
    ROLES,
    STATUSES,
    Conversation,
    Message,
    MessageMedia,
    utcnow,
)
from app.db.records import (
    MediaRecord,
    MessageRecord,
    SessionRecord,
    message_record,
    session_record,
)
from app.db.session_edits import SessionEdits
from app.db.sql_engine import WRITE_OPTION, make_engine


def _check_choice(name: str, value: str, allowed: Iterable[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")


def _check_content(content: Any) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
        raise ValueError("content must be a string or a list of content-part objects")


def _check_ints(name: str, value: list[int] | None) -> None:
    if value is not None and (
        not isinstance(value, list)
        or not all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    ):
        raise ValueError(f"{name} must be a list of integers")


class Store(SessionEdits, MediaRows):
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._write_engine = self.engine.execution_options(**{WRITE_OPTION: True})

    def migrate(self) -> None:
        """Bring the schema to the newest migration; a no-op when it is there already."""
        from app.db.migrate import upgrade  # alembic is only needed here

        upgrade(self.url)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self, write: bool = False) -> Iterator[Session]:
        engine = self._write_engine if write else self.engine
        with Session(engine, expire_on_commit=False) as s, s.begin():
            yield s

    def transaction(self, write: bool = False) -> AbstractContextManager[Session]:
        """One short transaction (committed on leaving, rolled back on an error); `write` takes
        the write connection. The other stores of app/db (documents, chunks, keys, claims, ...)
        share the database through it: one engine, one transaction discipline."""
        return self._tx(write)

    # --- sessions -----------------------------------------------------------------------

    def create_session(
        self,
        system_prompt: str | None = None,
        sampling: dict[str, Any] | None = None,
        title: str | None = None,
        messages: list[tuple[str, str | list[dict[str, Any]]]] | None = None,
        tenant_id: str = "",
        model: str | None = None,
    ) -> SessionRecord:
        """`messages`: (role, content) pairs of an imported conversation, stored as complete
        turns (without reply token ids: their next prompt is tokenized from the text);
        `model`: the name of the model whose server makes it. MediaNotVisible, and nothing
        stored, if one names media the tenant cannot see."""
        check_text("system_prompt", system_prompt)
        check_text("model", model)
        for role, content in messages or []:
            _check_choice("role", role, ROLES)
            _check_content(content)
        check_text("title", title)
        if sampling is not None and not isinstance(sampling, dict):
            raise ValueError("sampling must be an object")
        now = utcnow()
        conv = Conversation(
            id=uuid4().hex,
            tenant_id=tenant_id,
            title=title,
            system_prompt=system_prompt,
            sampling=dict(sampling or {}),
            model=model,
            created_at=now,
            updated_at=now,
        )
        rows = [
            Message(session_id=conv.id, seq=i, role=role, content=content, status="complete")
            for i, (role, content) in enumerate(messages or [])
        ]
        for row in rows:
            row.created_at = now
        with self._tx(write=True) as s:
            # Imported images: only uploads this tenant can see, or nothing is stored.
            unseen = unseen_media(s, [content for _, content in messages or []], tenant_id)
            if unseen is not None:
                raise unseen
            s.add(conv)
            s.flush()  # the conversation row first: the messages refer to it
            s.add_all(rows)
            s.flush()
            for row in rows:
                link_media(s, row, tenant_id)
            return session_record(conv, len(rows), [message_record(m) for m in rows])

    def list_sessions(
        self, limit: int = 100, offset: int = 0, tenant_id: str | None = None
    ) -> list[SessionRecord]:
        """Newest activity first; messages are not loaded (n_messages is). tenant_id: only
        that tenant's (None: everyone's)."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must be >= 0")
        n_messages = (
            select(func.count(Message.id))
            .where(Message.session_id == Conversation.id)
            .correlate(Conversation)
            .scalar_subquery()
        )
        query = (
            select(Conversation, n_messages)
            .order_by(Conversation.updated_at.desc(), Conversation.id.desc())
            .limit(limit)
            .offset(offset)
        )
        if tenant_id is not None:
            query = query.where(Conversation.tenant_id == tenant_id)
        with self._tx() as s:
            return [session_record(c, n) for c, n in s.execute(query).all()]

    def get_session(
        self, session_id: str, with_messages: bool = True, tenant_id: str | None = None
    ) -> SessionRecord | None:
        """None if it does not exist or belongs to another tenant (tenant_id None: any)."""
        with self._tx() as s:
            conv = s.get(Conversation, session_id)
            if conv is None or (tenant_id is not None and conv.tenant_id != tenant_id):
                return None
            if not with_messages:
                count = select(func.count(Message.id)).where(Message.session_id == session_id)
                return session_record(conv, s.scalar(count) or 0)
            query = select(Message).where(Message.session_id == session_id).order_by(Message.seq)
            messages = [message_record(m) for m in s.scalars(query)]
            return session_record(conv, len(messages), messages)

    def delete_session(self, session_id: str, tenant_id: str | None = None) -> bool:
        """True if it existed. Its messages go with it (ON DELETE CASCADE)."""
        return self.delete_session_and_media(session_id, tenant_id)[0]

    def delete_session_and_media(
        self, session_id: str, tenant_id: str | None = None
    ) -> tuple[bool, list[MediaRecord]]:
        """Delete a session (of tenant_id, unless None) and the media rows that only its
        messages used; returns whether it existed and the freed media (their files are the
        caller's to remove)."""
        owned = Conversation.id == session_id
        if tenant_id is not None:
            owned = owned & (Conversation.tenant_id == tenant_id)
        with self._tx(write=True) as s:
            used = (
                select(MessageMedia.media_id).join(Message).where(Message.session_id == session_id)
            )
            candidates = set(s.scalars(used))
            if s.execute(delete(Conversation).where(owned)).rowcount != 1:
                return False, []
            return True, self._free_unused(s, candidates)

    # --- messages -----------------------------------------------------------------------

    def delete_message(self, message_id: int) -> bool:
        """Take back a message that was refused before generation (queue full, shutting down)."""
        with self._tx(write=True) as s:
            return s.execute(delete(Message).where(Message.id == message_id)).rowcount == 1

    def add_message(
        self,
        session_id: str,
        role: str,
        content: str | list[dict[str, Any]],
        *,
        status: str = "complete",
        token_ids: list[int] | None = None,
        prompt_tokens: int | None = None,
        cached_tokens: int | None = None,
        completion_tokens: int | None = None,
        timings: dict[str, Any] | None = None,
        finish_reason: str | None = None,
        error: str | None = None,
        replace_from: int | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        reasoning: str | None = None,
        citations: list[dict[str, Any]] | None = None,
    ) -> MessageRecord:
        """Append a message at seq = last + 1. Raises KeyError if the session does not exist.
        `replace_from`: first delete the messages from that seq on, in the same transaction
        (regenerating a reply replaces the last turn, never loses it half-way). `citations`: a
        full-mode reply's, found from its text."""
        _check_choice("role", role, ROLES)
        _check_choice("status", status, STATUSES)
        _check_content(content)
        _check_ints("token_ids", token_ids)
        check_text("finish_reason", finish_reason)
        check_text("error", error)
        check_text("tool_call_id", tool_call_id)
        check_text("reasoning", reasoning)
        if tool_calls is not None and not all(isinstance(c, dict) for c in tool_calls):
            raise ValueError("tool_calls must be a list of objects")
        if citations is not None and not all(isinstance(c, dict) for c in citations):
            raise ValueError("citations must be a list of objects")
        if timings is not None and not isinstance(timings, dict):
            raise ValueError("timings must be an object")
        with self._tx(write=True) as s:
            # Lock the conversation row so concurrent appends to one session take turns
            # (PostgreSQL; SQLite has no FOR UPDATE, BEGIN IMMEDIATE already serialises).
            conv = s.scalar(
                select(Conversation).where(Conversation.id == session_id).with_for_update()
            )
            if conv is None:
                raise KeyError(session_id)
            if replace_from is not None:
                s.execute(
                    delete(Message).where(
                        Message.session_id == session_id, Message.seq >= replace_from
                    )
                )
            last = s.scalar(select(func.max(Message.seq)).where(Message.session_id == session_id))
            now = utcnow()
            message = Message(
                session_id=session_id,
                seq=0 if last is None else last + 1,
                role=role,
                content=content,
                token_ids=token_ids,
                prompt_tokens=prompt_tokens,
                cached_tokens=cached_tokens,
                completion_tokens=completion_tokens,
                timings=timings,
                finish_reason=finish_reason,
                status=status,
                error=error,
                created_at=now,
                tool_calls=tool_calls,
                tool_call_id=tool_call_id,
                reasoning=reasoning,
                citations=citations,
            )
            s.add(message)
            conv.updated_at = now
            s.flush()  # assigns message.id
            link_media(s, message, conv.tenant_id)  # the media it uses, reference-counted
            return message_record(message)
