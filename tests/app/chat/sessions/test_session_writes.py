"""A session turn's writes on a real database: the new messages stored holding the session's
turn, a second turn at once refused (here, or on another replica of the same database), a
refused turn undone, regenerate replacing, a dead replica's hold waited out, and a retry's
take-over refused once other turns came after its first try."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.chat.sessions.session_writes import Hold, NewMessage, SessionWrites
from app.db.replicas.session_leases import SessionLeases, TurnLease
from app.db.store import Store
from app.engine.request import RequestError
from tests.db_urls import migrated_store

HOLD = Hold("session_id", "this session is already generating a reply")
LEASE = 30.0  # never runs out by itself during a test


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with migrated_store("sqlite", tmp_path) as s:
        yield s


def contents(store: Store, session_id: str) -> list[tuple[str, object]]:
    session = store.get_session(session_id)
    assert session is not None
    return [(m.role, m.content) for m in session.messages]


def replica(store: Store, name: str = "r1", lease: float = LEASE) -> SessionWrites:
    return SessionWrites(store, name, lease)


class Notes:
    """What an Idempotency-Key's ticket is to the writes: what it noted."""

    def __init__(self, stored: dict[str, Any] | None = None, resumed: bool = False) -> None:
        self.stored = dict(stored or {})
        self.resumed = resumed

    async def note(self, **stored: Any) -> None:
        self.stored.update(stored)


def refused(e: pytest.ExceptionInfo[RequestError]) -> tuple[int, str | None, str | None]:
    return e.value.status, e.value.param, e.value.code


def test_new_messages_are_stored_in_order_and_hold_the_session(store: Store):
    async def run() -> None:
        writes, sid = replica(store), store.create_session().id
        new = [
            NewMessage("user", "hi"),
            NewMessage("assistant", "", [{"id": "c1", "name": "f", "arguments": "{}"}]),
            NewMessage("tool", "42", tool_call_id="c1"),
        ]
        stored = await writes.store_new(sid, new, HOLD)
        assert [m.role for m in stored] == ["user", "assistant", "tool"]
        assert stored[1].tool_calls == [{"id": "c1", "name": "f", "arguments": "{}"}]
        assert stored[2].tool_call_id == "c1"
        with pytest.raises(RequestError) as e:
            await writes.store_new(sid, [NewMessage("user", "again")], HOLD)
        assert refused(e) == (409, "session_id", "session_busy")
        assert await writes.busy(sid)
        writes.release(sid)(None)  # type: ignore[arg-type]  # the turn's end
        assert not await writes.busy(sid)
        await writes.store_new(sid, [NewMessage("user", "again")], HOLD)
        assert len(contents(store, sid)) == 4
        await writes.let_go(sid)

    asyncio.run(run())


def test_another_replica_on_the_database_waits_for_the_turn_to_end(store: Store):
    async def run() -> None:
        one, two, sid = replica(store, "r1"), replica(store, "r2"), store.create_session().id
        await one.store_new(sid, [NewMessage("user", "first")], HOLD)
        with pytest.raises(RequestError) as e:
            await two.store_new(sid, [NewMessage("user", "at once")], HOLD)
        assert refused(e) == (409, "session_id", "session_busy")
        assert await two.busy(sid)
        one.release(sid)(None)  # type: ignore[arg-type]
        await two.store_new(sid, [NewMessage("user", "after it")], HOLD)
        assert [c for _, c in contents(store, sid)] == ["first", "after it"]
        await two.let_go(sid)

    asyncio.run(run())


def test_a_dead_replicas_hold_is_waited_out_not_refused(store: Store):
    """A hold nobody renews (its replica died) runs out; the next turn waits for that."""

    async def run() -> None:
        sid = store.create_session().id
        assert isinstance(SessionLeases(store).take(sid, "dead/1", 0.3), TurnLease)
        writes = replica(store, lease=1.0)  # its half-lease: the dead hold is let run out
        await writes.store_new(sid, [NewMessage("user", "after the dead one")], HOLD)
        assert contents(store, sid) == [("user", "after the dead one")]
        await writes.let_go(sid)

    asyncio.run(run())


def test_a_refused_turn_is_undone_as_if_never_sent(store: Store):
    async def run() -> None:
        writes, sid = replica(store), store.create_session().id
        stored = await writes.store_new(
            sid, [NewMessage("user", "a"), NewMessage("user", "b")], HOLD
        )
        await writes.undo(sid, stored)()
        assert contents(store, sid) == [] and not await writes.busy(sid)

    asyncio.run(run())


def test_regenerate_replaces_from_the_seq_given(store: Store):
    async def run() -> None:
        writes, sid = replica(store), store.create_session().id
        store.add_message(sid, "user", "first")
        store.add_message(sid, "assistant", "reply")
        await writes.store_new(sid, [NewMessage("user", "first, again")], HOLD, replace_from=0)
        assert contents(store, sid) == [("user", "first, again")]
        await writes.let_go(sid)

    asyncio.run(run())


def test_a_deleted_session_is_not_found_and_not_held(store: Store):
    async def run() -> None:
        writes = replica(store)
        with pytest.raises(RequestError) as e:
            await writes.store_new("missing", [NewMessage("user", "hi")], HOLD)
        assert e.value.status == 404 and "missing" not in writes.held

    asyncio.run(run())


def test_a_keyed_turn_notes_where_it_begins_and_its_turn_before_storing(store: Store):
    async def run() -> None:
        writes, sid = replica(store), store.create_session().id
        store.add_message(sid, "user", "earlier")
        notes = Notes()
        await writes.store_new(sid, [NewMessage("user", "hi")], HOLD, notes=notes)
        assert notes.stored == {"from_seq": 1, "turn": 1}
        await writes.let_go(sid)

    asyncio.run(run())


def test_a_retry_replaces_its_first_try_only_if_no_turn_came_since(store: Store):
    async def run() -> None:
        writes, sid = replica(store), store.create_session().id
        first = Notes()
        await writes.store_new(sid, [NewMessage("user", "q")], HOLD, notes=first)
        await writes.let_go(sid)  # its replica died (the lease ran out): nothing else came
        again = [NewMessage("user", "q")]
        await writes.store_new(sid, again, HOLD, replace_from=0, expect=first.stored["turn"])
        assert contents(store, sid) == [("user", "q")]
        writes.release(sid)(None)  # type: ignore[arg-type]
        # Another turn came after it; a late retry of the first must not replace it.
        await writes.store_new(sid, [NewMessage("user", "next")], HOLD)
        writes.release(sid)(None)  # type: ignore[arg-type]
        with pytest.raises(RequestError) as e:
            await writes.store_new(sid, again, HOLD, replace_from=0, expect=first.stored["turn"])
        assert refused(e) == (409, "Idempotency-Key", "session_changed")
        assert contents(store, sid) == [("user", "q"), ("user", "next")]
        assert not await writes.busy(sid)

    asyncio.run(run())
