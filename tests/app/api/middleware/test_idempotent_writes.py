"""Idempotency-Key through real server processes: a keyed write stores once and its retry gets
the same response back; the key with another body is refused; a turn cut short by kill -9 after
its user message was stored is answered by the retry without a second copy of the message."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from bench.lib.server_process import ServerProcess
from tests.eventually import eventually

TURN = {"max_tokens": 8, "temperature": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    args = ("-np", "1", "-c", "2048", "--data-dir", str(data), "--doc-prefill-tokens", "0")
    with ServerProcess(*args) as srv:
        yield srv


def post(srv: ServerProcess, path: str, key: str | None, **kw) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return httpx.post(srv.base_url + path, headers=headers, **kw)


def new_session(srv: ServerProcess) -> str:
    r = post(srv, "/v1/sessions", None, json={})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def stored(srv: ServerProcess, sid: str) -> list[dict]:
    return httpx.get(f"{srv.base_url}/v1/sessions/{sid}").json()["messages"]


def refusal(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == "Idempotency-Key" and error["message"] and error["type"]
    return error


def test_a_turn_sent_twice_with_one_key_is_stored_and_answered_once(server: ServerProcess):
    sid = new_session(server)
    body = {"content": "Name a color.", **TURN}
    first = post(server, f"/v1/sessions/{sid}/messages", "turn-1", json=body)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers
    again = post(server, f"/v1/sessions/{sid}/messages", "turn-1", json=body)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert [m["role"] for m in stored(server, sid)] == ["user", "assistant"]
    # Another key is another turn.
    assert post(server, f"/v1/sessions/{sid}/messages", "turn-2", json=body).status_code == 200
    assert [m["role"] for m in stored(server, sid)] == ["user", "assistant"] * 2


def test_a_streamed_turn_is_replayed_as_it_was_streamed(server: ServerProcess):
    sid = new_session(server)
    body = {"content": "Name a fruit.", "stream": True, **TURN}
    first = post(server, f"/v1/sessions/{sid}/messages", "stream-1", json=body)
    again = post(server, f"/v1/sessions/{sid}/messages", "stream-1", json=body)
    assert first.status_code == again.status_code == 200
    assert again.headers["content-type"].startswith("text/event-stream")
    assert again.text == first.text and "data: [DONE]" in again.text
    assert [m["role"] for m in stored(server, sid)] == ["user", "assistant"]


def test_the_key_with_another_body_is_refused_and_stores_nothing(server: ServerProcess):
    sid = new_session(server)
    path = f"/v1/sessions/{sid}/messages"
    assert post(server, path, "k", json={"content": "Say hi.", **TURN}).status_code == 200
    error = refusal(post(server, path, "k", json={"content": "Say bye.", **TURN}), 422)
    assert "another request body" in error["message"]
    assert [m["content"] for m in stored(server, sid) if m["role"] == "user"] == ["Say hi."]
    # The same key on another route (another session) is another request.
    other = new_session(server)
    r = post(server, f"/v1/sessions/{other}/messages", "k", json={"content": "Say bye.", **TURN})
    assert r.status_code == 200, r.text


def test_a_bad_key_is_refused(server: ServerProcess):
    refusal(post(server, "/v1/sessions", "x" * 256, json={}), 400)


def test_creating_a_session_twice_with_one_key_creates_one(server: ServerProcess):
    before = len(httpx.get(server.base_url + "/v1/sessions").json()["data"])
    first = post(server, "/v1/sessions", "create-1", json={"title": "once"})
    again = post(server, "/v1/sessions", "create-1", json={"title": "once"})
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert len(httpx.get(server.base_url + "/v1/sessions").json()["data"]) == before + 1


def test_a_response_sent_twice_with_one_key_is_stored_once(server: ServerProcess):
    def n_sessions() -> int:
        return len(httpx.get(server.base_url + "/v1/sessions").json()["data"])

    before = n_sessions()
    body = {"input": "Name a color.", "max_output_tokens": 8, "temperature": 0}
    first = post(server, "/v1/responses", "resp-1", json=body)
    again = post(server, "/v1/responses", "resp-1", json=body)
    assert first.status_code == again.status_code == 200, first.text
    assert again.json()["id"] == first.json()["id"]
    assert n_sessions() == before + 1  # one conversation, not two


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 12), (200, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


def test_uploads_are_replayed_with_the_same_id(server: ServerProcess):
    # Each multipart body gets a boundary of its own: the same upload all the same.
    files = {"file": ("red.png", png(), "image/png")}
    first = post(server, "/v1/media", "media-1", files=files)
    again = post(server, "/v1/media", "media-1", files=files)
    assert first.status_code == again.status_code == 201, first.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    r = post(server, "/v1/collections", None, json={"name": "idem"})
    path = f"/v1/collections/{r.json()['id']}/documents"
    doc = {"filename": "tea.txt", "text": "Green tea leaves are steamed soon after picking."}
    first, again = (post(server, path, "doc-1", json=doc) for _ in range(2))
    assert first.status_code == again.status_code == 202, first.text
    assert again.json() == first.json() and not again.json().get("duplicate")
    listed = httpx.get(server.base_url + path).json()["data"]
    assert [d["id"] for d in listed] == [first.json()["id"]]


def test_a_turn_whose_server_died_mid_reply_is_answered_once_by_the_retry(tmp_path: Path):
    """kill -9 while the reply is generated (the user message stored, the key held); the retry
    with the same key, on a new server on the same database, waits for the dead one's hold to
    run out and answers the stored message instead of storing it again."""
    args = ("-np", "1", "-c", "2048", "--data-dir", str(tmp_path), "--idempotency-lease", "2")
    # Long enough to be killed mid-way; the second server stops the same request at 4 tokens.
    long_turn = {"content": "Count to a thousand.", "max_tokens": 1500, "ignore_eos": True}
    with ServerProcess(*args) as first:
        sid = new_session(first)
        path = f"/v1/sessions/{sid}/messages"
        cut: list[BaseException] = []

        def send() -> None:
            try:
                post(first, path, "long-1", json=long_turn)
            except httpx.HTTPError as e:
                cut.append(e)

        sender = threading.Thread(target=send)
        sender.start()
        eventually(lambda: len(stored(first, sid)) == 1, "the user message to be stored")
        eventually(
            lambda: httpx.get(first.base_url + "/health").json()["slots_processing"],
            "the reply to start",
        )
        first.proc.kill()  # SIGKILL: the hold on the key is never let go
        first.proc.wait()
        sender.join()
        assert cut, "the request was answered before the kill"
    with ServerProcess(*args, "--max-tokens-limit", "4") as second:
        # Another body under the key: refused, and nothing is stored.
        refusal(post(second, path, "long-1", json={**long_turn, "content": "Other."}), 422)
        r = post(second, path, "long-1", json=long_turn)
        assert r.status_code == 200, r.text
        assert "idempotent-replayed" not in r.headers
        messages = stored(second, sid)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[0]["content"] == long_turn["content"]
        assert messages[1]["content"] == r.json()["choices"][0]["message"]["content"]
        # Done now: the same request again is its response again.
        again = post(second, path, "long-1", json=long_turn)
        assert again.headers["idempotent-replayed"] == "true" and again.json() == r.json()
