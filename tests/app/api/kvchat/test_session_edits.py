"""Editing sessions through a real server: rename and settings (PATCH), fork at a message (an
edit as a new branch, with the cached tokens it gives up), regenerate the last reply."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "2", "-c", "2048") as srv:
        yield srv


def call(server: ServerProcess, method: str, path: str, body: dict | None = None):
    return httpx.request(method, server.base_url + path, json=body, timeout=120)


def new_session(server: ServerProcess, **body) -> str:
    r = call(server, "POST", "/v1/sessions", {"system_prompt": "You are terse.", **body})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def say(server: ServerProcess, sid: str, text: str) -> dict:
    body = {"content": text, "max_tokens": 8, "temperature": 0}
    r = call(server, "POST", f"/v1/sessions/{sid}/messages", body)
    assert r.status_code == 200, r.text
    return r.json()


def messages(server: ServerProcess, sid: str) -> list[dict]:
    return call(server, "GET", f"/v1/sessions/{sid}").json()["messages"]


def test_patch_renames_and_changes_settings_and_keeps_the_rest(server: ServerProcess):
    sid = new_session(server, title="old", sampling={"temperature": 0.5})
    r = call(server, "PATCH", f"/v1/sessions/{sid}", {"title": "new"})
    assert r.status_code == 200, r.text
    got = call(server, "GET", f"/v1/sessions/{sid}").json()
    assert (got["title"], got["system_prompt"]) == ("new", "You are terse.")
    assert got["sampling"] == {"temperature": 0.5}
    body = {"system_prompt": "Answer in French.", "sampling": {"max_tokens": 4}}
    r = call(server, "PATCH", f"/v1/sessions/{sid}", body)
    assert r.status_code == 200, r.text
    got = call(server, "GET", f"/v1/sessions/{sid}").json()
    assert (got["title"], got["system_prompt"]) == ("new", "Answer in French.")
    assert got["sampling"] == {"max_tokens": 4}
    # The new default applies to the next turn.
    out = say(server, sid, "Hi")
    assert out["usage"]["completion_tokens"] <= 8


def test_patch_refuses_bad_input_and_changes_nothing(server: ServerProcess):
    sid = new_session(server, title="kept")
    for body in [
        {"sampling": {"temprature": 1}},
        {"sampling": {"temperature": 9}},
        {"title": "x" * 201},
    ]:
        r = call(server, "PATCH", f"/v1/sessions/{sid}", body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["message"]
    assert call(server, "GET", f"/v1/sessions/{sid}").json()["title"] == "kept"
    r = call(server, "PATCH", "/v1/sessions/" + "0" * 32, {"title": "x"})
    assert r.status_code == 404


def test_fork_keeps_the_history_before_the_message_and_reports_the_cache_given_up(
    server: ServerProcess,
):
    sid = new_session(server, title="main")
    say(server, sid, "Name a colour.")
    second = say(server, sid, "Name a fruit.")
    msgs = messages(server, sid)
    r = call(server, "POST", f"/v1/sessions/{sid}/fork", {"message_id": msgs[2]["id"]})
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["id"] != sid and fork["title"] == "main"
    assert [m["content"] for m in fork["messages"]] == [m["content"] for m in msgs[:2]]
    assert fork["forked_from"] == {"session_id": sid, "message_id": msgs[2]["id"]}
    first = msgs[1]["usage"]
    kept = first["prompt_tokens"] + first["completion_tokens"]
    total = second["usage"]["prompt_tokens"] + second["usage"]["completion_tokens"]
    assert fork["cache"] == {"kept_tokens": kept, "given_up_tokens": total - kept}
    assert len(messages(server, sid)) == 4  # the source is unchanged
    # The branch continues from the kept prefix: its next turn reuses it from the cache.
    out = say(server, fork["id"], "Name an animal.")
    assert out["usage"]["prompt_tokens_details"]["cached_tokens"] >= kept - 1


def test_fork_of_an_unknown_message_is_a_404(server: ServerProcess):
    sid = new_session(server)
    r = call(server, "POST", f"/v1/sessions/{sid}/fork", {"message_id": 10**9})
    assert r.status_code == 404 and r.json()["error"]["param"] == "message_id"
    r = call(server, "POST", f"/v1/sessions/{sid}/fork", {"message_id": "x"})
    assert r.status_code == 400


def test_regenerate_replaces_the_last_reply(server: ServerProcess):
    sid = new_session(server)
    say(server, sid, "Say one word.")
    say(server, sid, "Say another word.")
    before = messages(server, sid)
    body = {"temperature": 1.0, "seed": 7, "max_tokens": 8}
    r = call(server, "POST", f"/v1/sessions/{sid}/regenerate", body)
    assert r.status_code == 200, r.text
    after = messages(server, sid)
    assert [m["role"] for m in after] == ["user", "assistant"] * 2
    assert [m["content"] for m in after[:3]] == [m["content"] for m in before[:3]]
    assert after[3]["id"] != before[3]["id"]
    assert after[3]["content"] == r.json()["choices"][0]["message"]["content"]
    # The turn before the regenerated one is all cached.
    usage = r.json()["usage"]
    assert (
        usage["prompt_tokens_details"]["cached_tokens"] >= before[3]["usage"]["prompt_tokens"] - 8
    )


def test_regenerate_without_a_user_message_is_refused(server: ServerProcess):
    sid = new_session(server)
    r = call(server, "POST", f"/v1/sessions/{sid}/regenerate", {})
    assert r.status_code == 400 and "no user message" in r.json()["error"]["message"]
    assert messages(server, sid) == []


def test_a_conversation_is_imported_with_its_history_and_continues(server: ServerProcess):
    history = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
    ]
    sid = new_session(server, title="imported", messages=history)
    got = messages(server, sid)
    assert [(m["role"], m["content"], m["status"]) for m in got] == [
        ("user", "My name is Ada.", "complete"),
        ("assistant", "Hello Ada.", "complete"),
    ]
    out = say(server, sid, "What is my name?")
    assert out["usage"]["prompt_tokens"] > 20  # the imported turns are in the prompt
    bad = call(server, "POST", "/v1/sessions", {"messages": [{"role": "tool", "content": "x"}]})
    assert bad.status_code == 400


def test_a_session_remembers_this_server_s_model_and_a_patch_moves_it(server: ServerProcess):
    name = call(server, "GET", "/v1/models").json()["data"][0]["id"]
    sid = new_session(server)
    assert call(server, "GET", f"/v1/sessions/{sid}").json()["model"] == name
    named = new_session(server, model=name)
    listed = {s["id"]: s["model"] for s in call(server, "GET", "/v1/sessions").json()["data"]}
    assert listed[sid] == listed[named] == name
    # A model this server does not serve is refused: nothing is stored or changed.
    r = call(server, "POST", "/v1/sessions", {"model": "not-here"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"
    assert "'not-here'" in r.json()["error"]["message"]
    r = call(server, "PATCH", f"/v1/sessions/{sid}", {"model": "not-here", "title": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"
    got = call(server, "GET", f"/v1/sessions/{sid}").json()
    assert (got["model"], got["title"]) == (name, None)
    # null: no model of its own (a router's default serves it); this server's name back.
    assert call(server, "PATCH", f"/v1/sessions/{sid}", {"model": None}).json()["model"] is None
    say(server, sid, "Hi")  # served as before
    assert call(server, "PATCH", f"/v1/sessions/{sid}", {"model": name}).json()["model"] == name
    first = messages(server, sid)[0]["id"]
    r = call(server, "POST", f"/v1/sessions/{sid}/fork", {"message_id": first})
    assert r.status_code == 201 and r.json()["model"] == name
