"""A session turn's writes on a real database: the new messages stored holding the session's
turn, a second turn at once refused, a refused turn undone, regenerate replacing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.chat.sessions.session_writes import Hold, NewMessage, SessionWrites
from app.db.store import Store
from app.engine.request import RequestError
from tests.db_urls import migrated_store

HOLD = Hold("session_id", "this session is already generating a reply")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with migrated_store("sqlite", tmp_path) as s:
        yield s


def contents(store: Store, session_id: str) -> list[tuple[str, object]]:
    session = store.get_session(session_id)
    assert session is not None
    return [(m.role, m.content) for m in session.messages]


def test_new_messages_are_stored_in_order_and_hold_the_session(store: Store):
    writes, sid = SessionWrites(store), store.create_session().id
    new = [
        NewMessage("user", "hi"),
        NewMessage("assistant", "", [{"id": "c1", "name": "f", "arguments": "{}"}]),
        NewMessage("tool", "42", tool_call_id="c1"),
    ]
    stored = asyncio.run(writes.store_new(sid, new, HOLD))
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert stored[1].tool_calls == [{"id": "c1", "name": "f", "arguments": "{}"}]
    assert stored[2].tool_call_id == "c1"
    with pytest.raises(RequestError) as e:
        asyncio.run(writes.store_new(sid, [NewMessage("user", "again")], HOLD))
    assert (e.value.status, e.value.param, e.value.code) == (409, "session_id", "session_busy")
    writes.release(sid)(None)  # type: ignore[arg-type]  # the turn's end
    asyncio.run(writes.store_new(sid, [NewMessage("user", "again")], HOLD))
    assert len(contents(store, sid)) == 4


def test_a_refused_turn_is_undone_as_if_never_sent(store: Store):
    writes, sid = SessionWrites(store), store.create_session().id
    stored = asyncio.run(
        writes.store_new(sid, [NewMessage("user", "a"), NewMessage("user", "b")], HOLD)
    )
    asyncio.run(writes.undo(sid, stored)())
    assert contents(store, sid) == [] and sid not in writes.busy


def test_regenerate_replaces_from_the_seq_given(store: Store):
    writes, sid = SessionWrites(store), store.create_session().id
    store.add_message(sid, "user", "first")
    store.add_message(sid, "assistant", "reply")
    asyncio.run(writes.store_new(sid, [NewMessage("user", "first, again")], HOLD, replace_from=0))
    assert contents(store, sid) == [("user", "first, again")]


def test_a_deleted_session_is_not_found_and_not_held(store: Store):
    writes = SessionWrites(store)
    with pytest.raises(RequestError) as e:
        asyncio.run(writes.store_new("missing", [NewMessage("user", "hi")], HOLD))
    assert e.value.status == 404 and "missing" not in writes.busy
