"""Resumable streams through a real server: a stream sent with `X-Conversation-Id` is read again
from byte 0 or N (`GET /v1/stream`), outlives its client, stops on `DELETE /v1/stream`, is its
tenant's only, and is kept within the stream settings' bounds (llama.cpp's test_stream.py runs
in router mode, which this server does not have).

Streams that must still be running while a test looks at them ask for 4000 tokens and are
stopped by the test (DELETE), never waited for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest
from fastapi import Response

from bench.lib.server_process import ServerProcess, make_key
from tests.app.api.keyed_server import KeyedServer
from tests.eventually import eventually

CONV = "X-Conversation-Id"
LONG = 4000  # tokens: a stream that runs until a test stops it
TIMEOUT = 120


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "2", "-c", "4096") as srv:
        yield srv


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    """Tenants alice, bob and carol; a stream per tenant, two on the server, 8 KiB each. Three
    slots: a request while two kept streams generate is served at once, not after them."""
    data = tmp_path_factory.mktemp("streams")
    keys = {name: make_key(data, name) for name in ("alice", "bob", "carol")}
    args = ("-np", "3", "-c", "4096", "--data-dir", str(data), "--doc-prefill-tokens", "0")
    limits = ("--streams-per-tenant", "1", "--streams-max", "2", "--stream-max-bytes", "8192")
    with ServerProcess(*args, *limits) as srv:
        yield KeyedServer(srv, data, keys)


def chat(max_tokens: int) -> dict:
    return {
        "messages": [{"role": "user", "content": "Count from one to ten."}],
        "stream": True,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }


def stream(url: str, conv: str, max_tokens: int, headers: dict | None = None) -> httpx.Response:
    """The whole streamed reply of a chat sent with `conv` as its conversation."""
    h = {CONV: conv, **(headers or {})}
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json=chat(max_tokens), headers=h, timeout=TIMEOUT
    ) as r:
        r.read()
    return r


def start_and_leave(url: str, conv: str, headers: dict | None = None) -> None:
    """A long stream whose client reads its first event and goes away."""
    h = {CONV: conv, **(headers or {})}
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json=chat(LONG), headers=h, timeout=TIMEOUT
    ) as r:
        assert r.status_code == 200, r.read()
        assert next(line for line in r.iter_lines() if line).startswith("data: ")


def replay(url: str, conv: str, start: int | None = 0, headers: dict | None = None):
    params = {"conv_id": conv} if start is None else {"conv_id": conv, "from": start}
    return httpx.get(url + "/v1/stream", params=params, headers=headers, timeout=TIMEOUT)


def stop(url: str, conv: str, headers: dict | None = None) -> httpx.Response:
    return httpx.delete(url + "/v1/stream", params={"conv_id": conv}, headers=headers)


def lookup(url: str, ids: list[str], headers: dict | None = None) -> list[dict]:
    r = httpx.post(url + "/v1/streams/lookup", json={"conversation_ids": ids}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def events(body: bytes) -> list[dict]:
    lines = body.decode().split("\n\n")
    return [json.loads(e[6:]) for e in lines if e.startswith("data: {")]


def idle(url: str) -> bool:
    return httpx.get(url + "/health").json()["slots_processing"] == 0


def test_a_finished_stream_replays_from_the_start_and_from_byte_n(server: ServerProcess):
    conv = "conv-1::org/model:Q8_0"  # slashes and colons, as llama-server's web UI makes ids
    first = stream(server.base_url, conv, 8)
    assert first.status_code == 200
    assert first.content.endswith(b"data: [DONE]\n\n")

    again = replay(server.base_url, conv, None)
    assert again.status_code == 200
    assert again.headers["content-type"].startswith("text/event-stream")
    assert again.content == first.content
    n = len(first.content) // 2
    assert replay(server.base_url, conv, n).content == first.content[n:]
    past = replay(server.base_url, conv, len(first.content) + 10)
    assert (past.status_code, past.content) == (200, b"")

    (info,) = lookup(server.base_url, ["conv-1", "conv-unknown"])
    assert info["conversation_id"] == conv
    assert info["is_done"] is True
    assert info["total_bytes"] == len(first.content)
    assert info["completed_at"] >= info["started_at"] > 0


def test_an_id_that_is_not_ascii_is_the_same_in_the_header_and_the_query(server: ServerProcess):
    url, conv = server.base_url, "conversación-ü"
    h = {CONV: conv.encode()}  # UTF-8 bytes, as a browser sends them
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json=chat(2), headers=h, timeout=TIMEOUT
    ) as r:
        sent = r.read()
    assert replay(url, conv).content == sent
    assert [s["conversation_id"] for s in lookup(url, [conv])] == [conv]


def test_a_stream_outlives_its_client_and_is_read_whole(server: ServerProcess):
    conv = "conv-gone"
    h = {CONV: conv}
    body = chat(24)
    with httpx.stream(
        "POST", server.base_url + "/v1/chat/completions", json=body, headers=h, timeout=TIMEOUT
    ) as r:
        assert r.status_code == 200
        assert next(line for line in r.iter_lines() if line).startswith("data: ")
    # The client went away after its first event; reading the stream waits for its end.
    whole = replay(server.base_url, conv)
    assert whole.status_code == 200
    assert whole.content.endswith(b"data: [DONE]\n\n")
    got = events(whole.content)
    assert got[-1]["usage"]["completion_tokens"] == 24  # ran to its end, not cancelled
    assert [e["choices"][0]["finish_reason"] for e in got if e["choices"]][-1] == "length"
    assert lookup(server.base_url, [conv])[0]["is_done"] is True


def test_delete_stops_a_running_stream_then_it_is_gone(server: ServerProcess):
    conv = "conv-stop"
    url = server.base_url
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json=chat(LONG), headers={CONV: conv}, timeout=60
    ) as r:
        lines = r.iter_lines()
        assert next(line for line in lines if line).startswith("data: ")
        assert lookup(url, [conv])[0]["is_done"] is False
        stopped = stop(url, conv)
        assert stopped.status_code == 204
        assert stopped.content == b""
        rest = "\n".join(lines)  # the client's stream ends too
    assert "[DONE]" not in rest
    assert '"finish_reason": "length"' not in rest
    gone = replay(url, conv)
    assert gone.status_code == 404
    assert gone.json()["error"]["message"] == "Stream not found or expired"
    assert stop(url, conv).status_code == 204  # idempotent, as llama-server's
    assert lookup(url, [conv]) == []
    eventually(lambda: idle(url), "the stopped generation's slot to be free")


def test_a_newer_stream_of_a_conversation_replaces_the_older(server: ServerProcess):
    url = server.base_url
    start_and_leave(url, "conv-again")
    newer = stream(url, "conv-again", 4)
    assert newer.content.endswith(b"data: [DONE]\n\n")
    assert replay(url, "conv-again").content == newer.content
    eventually(lambda: idle(url), "the older generation to be stopped")


def test_other_apis_streams_are_kept_and_unstreamed_replies_are_not(server: ServerProcess):
    url = server.base_url
    body = {"model": "m", "max_tokens": 4, "stream": True}
    body["messages"] = [{"role": "user", "content": "hi"}]
    with httpx.stream(
        "POST", url + "/v1/messages", json=body, headers={CONV: "conv-anthropic"}, timeout=60
    ) as r:
        sent = r.read()
    assert sent.startswith(b"event: message_start")
    assert replay(url, "conv-anthropic").content == sent

    whole = {**chat(4), "stream": False}
    r = httpx.post(url + "/v1/chat/completions", json=whole, headers={CONV: "conv-whole"})
    assert r.status_code == 200
    assert replay(url, "conv-whole").status_code == 404


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "conv_id"),
        ({"conv_id": ""}, "conv_id"),
        ({"conv_id": "c", "from": "-1"}, "from"),
        ({"conv_id": "c", "from": "x"}, "from"),
    ],
)
def test_bad_reads_are_400_naming_the_parameter(server: ServerProcess, params, param):
    r = httpx.get(server.base_url + "/v1/stream", params=params)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_bad_stops_ids_and_lookups_are_400(server: ServerProcess):
    url = server.base_url
    r = httpx.delete(url + "/v1/stream")
    assert (r.status_code, r.json()["error"]["param"]) == (400, "conv_id")
    long = stream(url, "c" * 513, 4)
    assert long.status_code == 400
    assert json.loads(long.content)["error"]["param"] == CONV
    assert replay(url, "c" * 513).status_code == 404  # nothing was kept
    too_many = {"conversation_ids": [f"c{i}" for i in range(257)]}
    assert httpx.post(url + "/v1/streams/lookup", json=too_many).status_code == 400
    wrong = {"conversation_ids": "c"}
    assert httpx.post(url + "/v1/streams/lookup", json=wrong).status_code == 400


def test_another_tenant_cannot_read_stop_or_list_a_stream(keyed: KeyedServer):
    url, alice, bob = keyed.url, keyed.auth("alice"), keyed.auth("bob")
    mine = stream(url, "shared", 4, alice)
    assert mine.status_code == 200
    theirs = replay(url, "shared", headers=bob)
    unknown = replay(url, "never-made", headers=bob)
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json() == unknown.json()  # no hint that the id exists
    assert lookup(url, ["shared"], bob) == []
    assert stop(url, "shared", bob).status_code == 204
    assert replay(url, "shared", headers=alice).content == mine.content  # not stopped

    # The same id is a stream of bob's own.
    his = stream(url, "shared", 4, bob)
    assert replay(url, "shared", headers=bob).content == his.content
    assert replay(url, "shared", headers=alice).content == mine.content
    assert [s["conversation_id"] for s in lookup(url, ["shared"], alice)] == ["shared"]
    assert replay(url, "shared").status_code == 401  # no key, no stream
    for who in (alice, bob):
        assert stop(url, "shared", who).status_code == 204


def test_a_tenant_keeps_at_most_its_streams(keyed: KeyedServer):
    url, alice = keyed.url, keyed.auth("alice")
    start_and_leave(url, "a1", alice)
    refused = stream(url, "a2", 4, alice)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    error = json.loads(refused.content)["error"]
    assert error["code"] == "too_many_streams"
    assert "--streams-per-tenant" in error["message"]
    assert lookup(url, ["a1"], alice)[0]["is_done"] is False  # the running one is kept
    assert replay(url, "a2", headers=alice).status_code == 404

    assert stop(url, "a1", alice).status_code == 204
    assert stream(url, "a2", 4, alice).status_code == 200
    # A finished stream gives its place to the next one.
    a3 = stream(url, "a3", 4, alice)
    assert a3.status_code == 200
    assert replay(url, "a2", headers=alice).status_code == 404
    assert replay(url, "a3", headers=alice).content == a3.content
    assert stop(url, "a3", alice).status_code == 204


def test_the_server_keeps_at_most_streams_max(keyed: KeyedServer):
    url = keyed.url
    alice, bob, carol = (keyed.auth(n) for n in ("alice", "bob", "carol"))
    start_and_leave(url, "long", alice)
    start_and_leave(url, "long", bob)
    refused = stream(url, "c1", 4, carol)
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "1"
    assert "--streams-max" in json.loads(refused.content)["error"]["message"]
    plain = {**chat(2), "stream": True}
    r = httpx.post(url + "/v1/chat/completions", json=plain, headers=carol, timeout=TIMEOUT)
    assert r.status_code == 200  # a stream without the header is not kept, so not refused

    for who in (alice, bob):
        assert stop(url, "long", who).status_code == 204
    assert stream(url, "c1", 4, carol).status_code == 200
    assert stop(url, "c1", carol).status_code == 204
    eventually(lambda: idle(url), "the stopped generations' slots to be free")


def test_a_stream_keeps_only_its_last_bytes(keyed: KeyedServer):
    url, alice = keyed.url, keyed.auth("alice")
    assert stream(url, "big", 64, alice).status_code == 200
    (info,) = lookup(url, ["big"], alice)
    total = info["total_bytes"]
    assert total > 8192
    dropped = total - 8192
    lost = replay(url, "big", 0, alice)
    assert lost.status_code == 400
    error = lost.json()["error"]
    assert (error["param"], error["code"]) == ("from", "stream_offset_lost")
    assert f"read from {dropped} or later" in error["message"]
    tail = replay(url, "big", dropped, alice)
    assert tail.status_code == 200
    assert len(tail.content) == 8192
    assert tail.content.endswith(b"data: [DONE]\n\n")
    assert stop(url, "big", alice).status_code == 204


def test_a_stream_whose_generation_has_not_started_answers_503():
    """Kept before its generation starts (a model still loading, in llama-server's router):
    a reader is told to come back, as llama-server's."""
    from app.api.llama_server.stream_routes import read_stream  # the route alone, no server
    from app.api.llama_server.stream_store import StreamLimits, StreamStore

    async def run() -> Response:
        streams = StreamStore(StreamLimits(1, 1, 1024, 300.0))
        streams.open("", "c")
        caller = SimpleNamespace(state=SimpleNamespace())
        services = SimpleNamespace(streams=streams)
        return await read_stream(services, caller, "c", 0)  # type: ignore[arg-type]

    r = asyncio.run(run())
    assert (r.status_code, r.headers["Retry-After"]) == (503, "1")
