from __future__ import annotations

import pytest

from app.db.store import Store


def test_update_session_changes_only_the_given_fields(store: Store):
    s = store.create_session("sys", {"temperature": 0.1}, "t")
    got = store.update_session(s.id, title="renamed")
    assert got is not None and (got.title, got.system_prompt, got.sampling) == (
        "renamed",
        "sys",
        {"temperature": 0.1},
    )
    got = store.update_session(s.id, system_prompt=None, sampling={})
    assert got is not None and (got.title, got.system_prompt, got.sampling) == ("renamed", None, {})
    assert store.update_session("nope", title="x") is None
    with pytest.raises(ValueError):
        store.update_session(s.id, title="a\x00b")


def test_fork_copies_the_messages_before_the_point_and_leaves_the_source(store: Store):
    s = store.create_session("sys", {"max_tokens": 4}, "t")
    for i in range(4):
        store.add_message(s.id, "user" if i % 2 == 0 else "assistant", f"m{i}", token_ids=[i])
    fork = store.fork_session(s.id, 2)
    assert fork is not None and fork.id != s.id
    got = store.get_session(fork.id)
    assert got is not None and [m.content for m in got.messages] == ["m0", "m1"]
    assert got.messages[1].token_ids == [1] and got.sampling == {"max_tokens": 4}
    source = store.get_session(s.id)
    assert source is not None and len(source.messages) == 4
    assert store.fork_session("nope", 0) is None


def test_add_message_can_replace_the_last_turn_at_once(store: Store):
    s = store.create_session()
    for i in range(4):
        store.add_message(s.id, "user" if i % 2 == 0 else "assistant", f"m{i}")
    store.add_message(s.id, "user", "again", replace_from=2)
    got = store.get_session(s.id)
    assert got is not None and [(m.seq, m.content) for m in got.messages] == [
        (0, "m0"),
        (1, "m1"),
        (2, "again"),
    ]


def test_a_session_remembers_its_model_and_a_patch_moves_it(store: Store):
    s = store.create_session("sys", model="twin")
    assert s.model == "twin" and store.get_session(s.id).model == "twin"
    assert [x.model for x in store.list_sessions()] == ["twin"]
    assert store.update_session(s.id, title="t").model == "twin"  # kept when not given
    assert store.update_session(s.id, model="smollm2").model == "smollm2"
    fork = store.fork_session(s.id, 0)
    assert fork is not None and fork.model == "smollm2"  # a branch goes on where it was
    assert store.update_session(s.id, model=None).model is None  # no model: a router's default
    assert store.create_session().model is None
    with pytest.raises(ValueError):
        store.create_session(model="a\x00b")
    with pytest.raises(ValueError):
        store.update_session(s.id, model="a\x00b")
