"""Sessions API through a real server, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from tests.db_urls import fresh_database_url
from tests.eventually import eventually

SYSTEM = (
    "You are a patient tutor. You answer questions about geography, history and science in "
    "short, friendly sentences, and you never invent facts you are not sure about."
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request, tmp_path_factory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    with (
        fresh_database_url(request.param, data) as url,
        ServerProcess(
            "-np", "2", "-c", "4096", "--data-dir", str(data), "--database-url", url
        ) as srv,
    ):
        yield srv


def post(server: ServerProcess, path: str, body: dict, **kw) -> httpx.Response:
    return httpx.post(server.base_url + path, json=body, timeout=120, **kw)


def new_session(server: ServerProcess, **body) -> str:
    r = post(server, "/v1/sessions", {"system_prompt": SYSTEM, **body})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def say(server: ServerProcess, sid: str, text: str, **fields) -> dict:
    body = {"content": text, "max_tokens": 24, "temperature": 0, **fields}
    r = post(server, f"/v1/sessions/{sid}/messages", body)
    assert r.status_code == 200, r.text
    return r.json()


def test_five_turns_reuse_the_whole_stored_history(server: ServerProcess):
    sid = new_session(server)
    questions = [
        "What is the capital of France?",
        "And of Italy?",
        "Which of the two is further south?",
        "Name a river in the first one.",
        "Thanks. Summarise our chat in one sentence.",
    ]
    previous = None
    for i, q in enumerate(questions):
        out = say(server, sid, q)
        assert out["session_id"] == sid
        usage = out["usage"]
        if previous is not None:
            history = previous["prompt_tokens"] + previous["completion_tokens"]
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            assert cached >= 0.95 * history, (i, cached, history)
            # Token for token: the KV held the last prompt and the reply's own ids (all but a
            # reply's last token when max_tokens cut it), and the new prompt starts with them.
            assert cached >= history - 1, (i, cached, history)
        previous = usage
    got = httpx.get(f"{server.base_url}/v1/sessions/{sid}", timeout=30).json()
    assert [m["role"] for m in got["messages"]] == ["user", "assistant"] * 5
    assert all(m["status"] == "complete" for m in got["messages"])
    assert [m["content"] for m in got["messages"][::2]] == questions


def test_a_streamed_reply_is_stored_as_it_was_sent(server: ServerProcess):
    sid = new_session(server, sampling={"temperature": 0, "max_tokens": 16})
    text, ids = "", set()
    body = {"content": "Say hello.", "stream": True}
    with httpx.stream(
        "POST", f"{server.base_url}/v1/sessions/{sid}/messages", json=body, timeout=120
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                ids.add(chunk["session_id"])
                for choice in chunk["choices"]:
                    text += choice["delta"].get("content") or ""
    assert ids == {sid}
    messages = httpx.get(f"{server.base_url}/v1/sessions/{sid}", timeout=30).json()["messages"]
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"] == text and text
    assert messages[-1]["status"] == "complete" and messages[-1]["finish_reason"] in {
        "stop",
        "length",
    }


def test_bad_input_gets_a_clear_error_and_stores_nothing(server: ServerProcess):
    sid = new_session(server)
    url = f"/v1/sessions/{sid}/messages"
    cases = [
        (url, {"content": ""}, 400),
        (url, {"content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}, 400),
        (url, {"content": "hi", "temperature": 7}, 400),
        (url, {"content": "x " * 5000}, 400),  # over the context
        ("/v1/sessions/nope/messages", {"content": "hi"}, 404),
        ("/v1/sessions", {"sampling": {"temprature": 0.1}}, 400),
    ]
    for path, body, status in cases:
        r = post(server, path, body)
        assert r.status_code == status, (path, body, r.text)
        assert r.json()["error"]["message"]
    got = httpx.get(f"{server.base_url}/v1/sessions/{sid}", timeout=30).json()
    assert got["messages"] == []


def test_sessions_are_listed_and_deleted(server: ServerProcess):
    sid = new_session(server, title="to delete")
    listed = httpx.get(f"{server.base_url}/v1/sessions", timeout=30).json()["data"]
    assert sid in [s["id"] for s in listed]
    assert httpx.delete(f"{server.base_url}/v1/sessions/{sid}", timeout=30).json()["deleted"]
    assert httpx.get(f"{server.base_url}/v1/sessions/{sid}", timeout=30).status_code == 404
    assert httpx.delete(f"{server.base_url}/v1/sessions/{sid}", timeout=30).status_code == 404


def test_session_defaults_apply_and_a_request_overrides_them(server: ServerProcess):
    sid = new_session(server, sampling={"max_tokens": 3, "temperature": 0})
    assert say(server, sid, "Count to ten.", max_tokens=None)["usage"]["completion_tokens"] <= 3
    out = post(
        server,
        f"/v1/sessions/{sid}/messages",
        {"content": "Again.", "max_tokens": 5, "ignore_eos": True},
    )
    assert out.json()["usage"]["completion_tokens"] == 5


def test_chat_completions_keep_a_session_on_its_slot(server: ServerProcess):
    sid = new_session(server)  # a chat names a session the server knows (unknown: 404)
    history = [{"role": "user", "content": "Name a planet."}]
    body = {"messages": history, "max_tokens": 8, "temperature": 0}
    first = post(server, "/v1/chat/completions", body, headers={"X-Session-Id": sid}).json()
    slot = first["timings"]["id_slot"]
    slots = httpx.get(f"{server.base_url}/slots", timeout=30).json()
    assert [s["session"] for s in slots if s["id"] == slot] == [sid]
    history += [
        {"role": "assistant", "content": first["choices"][0]["message"]["content"]},
        {"role": "user", "content": "Another one."},
    ]
    again = post(server, "/v1/chat/completions", {**body, "session_id": sid}).json()
    assert again["timings"]["id_slot"] == slot
    # The whole first turn, reply included token for token, came from the KV.
    n = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= n - 1


def test_content_parts_are_taken_and_stored_as_sent(server: ServerProcess):
    sid = new_session(server)
    parts = [{"type": "text", "text": "Name a "}, {"type": "text", "text": "fruit."}]
    out = say(server, sid, parts)  # type: ignore[arg-type]
    assert out["choices"][0]["message"]["content"]
    stored = httpx.get(f"{server.base_url}/v1/sessions/{sid}", timeout=30).json()["messages"]
    assert stored[0]["content"] == parts


def test_nul_characters_are_refused_on_every_backend(server: ServerProcess):
    assert post(server, "/v1/sessions", {"system_prompt": "a\x00b"}).status_code == 400
    sid = new_session(server)
    r = post(server, f"/v1/sessions/{sid}/messages", {"content": "a\x00b"})
    assert r.status_code == 400
    assert httpx.get(f"{server.base_url}/v1/sessions/a%00b", timeout=30).status_code == 404


def test_a_second_turn_while_one_is_generating_gets_409(server: ServerProcess):
    sid = new_session(server)
    url = f"{server.base_url}/v1/sessions/{sid}/messages"
    body = {"content": "Tell a long story.", "stream": True, "max_tokens": 200, "ignore_eos": True}
    with httpx.stream("POST", url, json=body, timeout=120) as r:
        lines = r.iter_lines()  # kept referenced: a dropped iterator closes the response
        next(line for line in lines if '"content": "' in line and '"role"' not in line)
        busy = post(server, f"/v1/sessions/{sid}/messages", {"content": "Hello?"})
        assert busy.status_code == 409
        assert busy.json()["error"]["code"] == "session_busy"
    # The stream was closed early: its reply is stored as cancelled, and the session goes on.
    eventually(
        lambda: len(httpx.get(f"{server.base_url}/v1/sessions/{sid}").json()["messages"]) == 2,
        "the cancelled reply to be stored",
    )
    assert say(server, sid, "Hello?", max_tokens=4)["session_id"] == sid
    roles = [
        m["role"] for m in httpx.get(f"{server.base_url}/v1/sessions/{sid}").json()["messages"]
    ]
    assert roles == ["user", "assistant", "user", "assistant"]
