"""ResponseSessions' take-over of a dead replica's try, on a real database: what that try stored
goes (the conversation it began, or the inputs it added) only if its conversation has had no
other turn since; otherwise the retry is refused and nothing is deleted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from app.chat.chat_turn import ChatTurns
from app.chat.sessions.response_sessions import ResponseSessions
from app.chat.sessions.session_writes import NewMessage, SessionWrites
from app.chat.sessions.stored_turns import RESPONSE_HOLD, StoredTurns
from app.db.store import Store
from app.engine.request import RequestError
from tests.db_urls import migrated_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with migrated_store("sqlite", tmp_path) as s:
        yield s


class Notes:
    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored, self.resumed = dict(stored), True

    async def note(self, **stored: Any) -> None:
        self.stored.update(stored)


def roles(store: Store, sid: str) -> list[str] | None:
    session = store.get_session(sid)
    return None if session is None else [m.role for m in session.messages]


def sessions(store: Store) -> tuple[ResponseSessions, SessionWrites]:
    writes = SessionWrites(store, "r1", 30.0)
    turns = StoredTurns(cast(ChatTurns, None), writes)  # only its writes are used here
    return ResponseSessions(store, turns), writes


async def first_try(writes: SessionWrites, sid: str) -> Notes:
    """A try that stored its input, then its replica died (the hold ran out)."""
    notes = Notes({"session_id": sid})
    await writes.store_new(sid, [NewMessage("user", "q")], RESPONSE_HOLD, notes=notes)
    await writes.let_go(sid)
    return notes


def test_the_inputs_a_dead_try_added_go_when_nothing_came_after(store: Store):
    async def run() -> None:
        responses, writes = sessions(store)
        sid = store.create_session().id
        store.add_message(sid, "user", "earlier")
        store.add_message(sid, "assistant", "answer")
        notes = await first_try(writes, sid)
        await responses._undo_earlier_try(notes)  # noqa: SLF001
        assert roles(store, sid) == ["user", "assistant"]
        assert notes.stored["from_seq"] is None and notes.stored["turn"] is None

    asyncio.run(run())


def test_a_late_retry_never_deletes_the_turns_that_came_after(store: Store):
    async def run() -> None:
        responses, writes = sessions(store)
        sid = store.create_session().id
        notes = await first_try(writes, sid)
        # The conversation went on without it.
        await writes.store_new(sid, [NewMessage("user", "next")], RESPONSE_HOLD)
        await writes.let_go(sid)
        with pytest.raises(RequestError) as e:
            await responses._undo_earlier_try(notes)  # noqa: SLF001
        assert (e.value.status, e.value.param, e.value.code) == (
            409,
            "Idempotency-Key",
            "session_changed",
        )
        assert "conversation" in e.value.message
        assert roles(store, sid) == ["user", "user"] and not await writes.busy(sid)

    asyncio.run(run())


def test_a_conversation_a_dead_try_began_goes_unless_it_was_continued(store: Store):
    async def run() -> None:
        responses, writes = sessions(store)
        began = store.create_session().id
        notes = await first_try(writes, began)
        notes.stored["created_session"] = began
        await responses._undo_earlier_try(notes)  # noqa: SLF001
        assert roles(store, began) is None
        # Continued meanwhile (its response id was streamed to the client): kept.
        kept = store.create_session().id
        notes = await first_try(writes, kept)
        notes.stored["created_session"] = kept
        await writes.store_new(kept, [NewMessage("user", "continued")], RESPONSE_HOLD)
        await writes.let_go(kept)
        with pytest.raises(RequestError) as e:
            await responses._undo_earlier_try(notes)  # noqa: SLF001
        assert e.value.code == "session_changed"
        assert roles(store, kept) == ["user", "user"]

    asyncio.run(run())
