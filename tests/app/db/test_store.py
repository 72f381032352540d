from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from app.db.models import media_id
from app.db.store import Store
from tests.eventually import eventually

ROOT = Path(__file__).resolve().parents[3]
SHA = "ab" * 32


def test_create_get_list_delete(store: Store):
    a = store.create_session(system_prompt="be brief", sampling={"temperature": 0.2}, title="A")
    assert len(a.id) == 32 and a.n_messages == 0 and a.messages == []
    assert a.created_at.tzinfo is UTC and a.created_at == a.updated_at
    b = store.create_session()
    assert b.sampling == {} and b.title is None and b.system_prompt is None

    got = store.get_session(a.id)
    assert got is not None
    assert (got.title, got.system_prompt, got.sampling) == ("A", "be brief", {"temperature": 0.2})
    assert got.created_at == a.created_at and got.created_at.tzinfo is UTC
    assert store.get_session("nope") is None

    assert [s.id for s in store.list_sessions()] == [b.id, a.id]
    assert store.delete_session(a.id) is True
    assert store.delete_session(a.id) is False
    assert store.get_session(a.id) is None
    assert [s.id for s in store.list_sessions()] == [b.id]


def test_list_sessions_newest_activity_first_with_counts_and_paging(store: Store):
    ids = [store.create_session(title=str(i)).id for i in range(4)]
    store.add_message(ids[1], "user", "hi")
    store.add_message(ids[1], "assistant", "hello")
    store.add_message(ids[0], "user", "later")  # most recent activity
    listed = store.list_sessions()
    assert [s.id for s in listed] == [ids[0], ids[1], ids[3], ids[2]]
    assert [s.n_messages for s in listed] == [1, 2, 0, 0]
    assert all(s.messages == [] for s in listed)
    assert [s.id for s in store.list_sessions(limit=2, offset=1)] == [ids[1], ids[3]]
    assert store.list_sessions(limit=0) == []
    with pytest.raises(ValueError):
        store.list_sessions(limit=-1)


def test_add_message_orders_by_seq_and_bumps_updated_at(store: Store):
    sid = store.create_session().id
    before = store.get_session(sid)
    first = store.add_message(sid, "user", "one")
    second = store.add_message(
        sid,
        "assistant",
        "two",
        token_ids=[5, 6, 7],
        prompt_tokens=10,
        cached_tokens=4,
        completion_tokens=3,
        timings={"prompt_ms": 1.5, "cache_n": 4},
        finish_reason="stop",
    )
    third = store.add_message(sid, "assistant", "par", status="cancelled", finish_reason=None)
    assert (first.seq, second.seq, third.seq) == (0, 1, 2)
    assert first.id < second.id < third.id

    got = store.get_session(sid)
    assert got is not None and got.n_messages == 3
    assert [m.content for m in got.messages] == ["one", "two", "par"]
    assert got.messages[1] == second
    assert got.messages[2].status == "cancelled" and got.messages[0].token_ids is None
    assert got.updated_at == third.created_at > before.updated_at
    assert got.created_at == before.created_at
    light = store.get_session(sid, with_messages=False)
    assert light is not None and light.n_messages == 3 and light.messages == []


def test_error_messages_keep_their_error(store: Store):
    sid = store.create_session().id
    m = store.add_message(sid, "assistant", "", status="error", error="context full")
    assert (m.status, m.error) == ("error", "context full")
    assert store.get_session(sid).messages[0].error == "context full"


def test_add_message_to_a_missing_session_raises_key_error(store: Store):
    with pytest.raises(KeyError):
        store.add_message("missing", "user", "hi")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"role": "function"},
        {"status": "done"},
        {"content": 5},
        {"content": ["not a part"]},
        {"token_ids": [1, "2"]},
        {"error": "nul\x00"},
        {"citations": ["not an object"]},
    ],
)
def test_invalid_values_raise_value_error_and_store_nothing(store: Store, kwargs: dict):
    sid = store.create_session().id
    args: dict[str, Any] = {"role": "user", "content": "x", **kwargs}
    role, content = args.pop("role"), args.pop("content")
    with pytest.raises(ValueError):
        store.add_message(sid, role, content, **args)
    assert store.get_session(sid).n_messages == 0


def test_a_full_mode_reply_keeps_its_citations_and_a_fork_copies_them(store: Store):
    sid = store.create_session().id
    store.add_message(sid, "user", "Where is Etna?")
    cited = [{"index": 3, "chunk_id": "chunk-7", "document_id": "doc-1", "score": 0.5}]
    store.add_message(sid, "assistant", "In Sicily.", citations=cited)
    store.add_message(sid, "assistant", "No sources.", citations=[])
    user, reply, none = store.get_session(sid).messages
    assert user.citations is None and reply.citations == cited and none.citations == []
    fork = store.fork_session(sid, 2)
    assert [m.citations for m in fork.messages] == [None, cited]


def test_delete_cascades_to_messages(store: Store):
    keep = store.create_session().id
    gone = store.create_session().id
    for sid in (keep, gone, gone):
        store.add_message(sid, "user", "x")
    assert store.delete_session(gone)
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT session_id FROM messages")).scalars().all()
    assert rows == [keep]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
contents = st.text() | st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text()})
    | st.fixed_dictionaries(
        {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": st.text()})}
    )
    | st.dictionaries(st.text(), json_values, max_size=4),
    max_size=4,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    content=contents,
    token_ids=st.none() | st.lists(st.integers(min_value=0, max_value=2**31 - 1), max_size=300),
    timings=st.none() | st.dictionaries(st.text(), json_values, max_size=4),
)
def test_json_fields_round_trip_exactly(store: Store, content, token_ids, timings):
    sid = store.create_session(sampling={"stop": ["\n"], "seed": 7}).id
    store.add_message(sid, "assistant", content, token_ids=token_ids, timings=timings)
    got = store.get_session(sid)
    assert got is not None
    m = got.messages[0]
    # Compare the serialised form too: == alone would accept 1 for 1.0 or reordered keys.
    for stored, given_ in ((m.content, content), (m.token_ids, token_ids), (m.timings, timings)):
        assert stored == given_ and json.dumps(stored) == json.dumps(given_)
    assert got.sampling == {"stop": ["\n"], "seed": 7}


def test_concurrent_appends_to_one_session_get_unique_contiguous_seq(store: Store):
    sid = store.create_session().id
    n_threads, per_thread = 8, 12
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def append(t: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                store.add_message(sid, "user", f"{t}:{i}")
        except BaseException as e:  # surfaced by the assert below
            errors.append(e)

    threads = [threading.Thread(target=append, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    messages = store.get_session(sid).messages
    assert [m.seq for m in messages] == list(range(n_threads * per_thread))
    for t in range(n_threads):  # each thread's messages kept its own order
        mine = [m.content for m in messages if m.content.startswith(f"{t}:")]
        assert mine == [f"{t}:{i}" for i in range(per_thread)]


def test_media_is_idempotent_by_tenant_and_sha256(store: Store):
    a = store.add_media(SHA, "image/png", 1234, "media/ab/abab.png", "alice")
    assert a.id == media_id(SHA, "alice") and a.size == 1234 and a.created_at.tzinfo is UTC
    again = store.add_media(SHA.upper(), "image/jpeg", 1, "elsewhere", "alice")
    assert again == a
    assert store.get_media(a.id) == a
    theirs = store.add_media(SHA, "image/png", 1234, "media/ab/abab.png", "bob")
    assert theirs.id != a.id and theirs.sha256 == a.sha256  # a row of bob's own
    assert store.get_media("media-none") is None
    with pytest.raises(ValueError):
        store.add_media("xyz", "image/png", 1, "p")


def test_concurrent_add_media_of_one_file_gives_one_record(store: Store):
    results: list[Any] = []
    barrier = threading.Barrier(6)

    def add() -> None:
        barrier.wait()
        results.append(store.add_media(SHA, "image/png", 10, "p"))

    threads = [threading.Thread(target=add) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 6 and all(r == results[0] for r in results)


WRITER = """
import sys
from app.db.store import Store
store = Store(sys.argv[1])
print("ready", flush=True)
while True:
    store.add_message(sys.argv[2], "user", "x" * 200, token_ids=list(range(100)))
"""


def test_kill_9_while_writing_leaves_a_consistent_database(database_url: str):
    store = Store(database_url)
    store.migrate()
    sid = store.create_session().id
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, database_url, sid], stdout=subprocess.PIPE, cwd=ROOT
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        # Killed while it writes: some rows are in, and the next is on its way.
        eventually(lambda: store.get_session(sid).n_messages >= 20, "the writer to write rows")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    store.close()

    store = Store(database_url)
    n = store.get_session(sid).n_messages
    assert n > 0
    assert store.add_message(sid, "assistant", "after").seq == n  # no lock left behind
    assert [m.seq for m in store.get_session(sid).messages] == list(range(n + 1))
    if database_url.startswith("sqlite"):
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    store.close()


def test_sqlite_file_setup(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path}/new/dir/kv.db")  # parent directories are created
    store.migrate()
    with store.engine.connect() as conn:
        pragma = conn.exec_driver_sql
        assert pragma("PRAGMA journal_mode").scalar() == "wal"
        assert pragma("PRAGMA synchronous").scalar() == 2  # FULL
        assert pragma("PRAGMA foreign_keys").scalar() == 1
    store.close()


def test_a_refused_message_can_be_taken_back(store):
    s = store.create_session()
    first = store.add_message(s.id, "user", "kept")
    refused = store.add_message(s.id, "user", "refused")
    assert store.delete_message(refused.id)
    assert not store.delete_message(refused.id)
    assert [m.content for m in store.get_session(s.id).messages] == ["kept"]
    assert first.id != refused.id
