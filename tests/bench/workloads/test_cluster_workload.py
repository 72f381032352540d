"""bench.workloads.cluster_workload against a faked server (httpx's MockTransport): a round sends
every session's next message once and the collections' questions of that round, records failures
instead of raising, and learns which replica holds each key from X-Replica."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest

from bench.lib import client
from bench.workloads.cluster_workload import MESSAGES, QUICK, Collection, Workload


def sse(prompt: int, cached: int) -> bytes:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"choices": [], "usage": usage},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict]]:
    """(path, body) of every request; sessions answer from replica-1, the collection `down`
    answers 503, other collections answer from replica-2."""
    seen: list[tuple[str, dict]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        if request.url.path.startswith("/v1/collections/down/"):
            return httpx.Response(503, json={"error": {"message": "down"}})
        replica = "replica-1" if request.url.path.startswith("/v1/sessions/") else "replica-2"
        return httpx.Response(200, content=sse(100, 90), headers={"X-Replica": replica})

    fake = httpx.Client(transport=httpx.MockTransport(handler))
    monkeypatch.setattr(client, "_http", fake)
    return seen


def test_a_round_sends_each_sessions_message_and_the_rounds_questions(sent):
    plan = replace(QUICK, questions=2)
    load = Workload(plan, "http://x")
    load.sessions = ["s1", "s2", "s3"]
    load.collections = [Collection("c1", ["d"], ["q1", "q2", "q3", "q4", "q5", "q6"])]
    calls = load.round(2)
    turns = sorted(p for p, _ in sent if p.startswith("/v1/sessions/"))
    assert turns == [f"/v1/sessions/{s}/messages" for s in ("s1", "s2", "s3")]
    assert {b["content"] for p, b in sent if p.startswith("/v1/sessions/")} == {MESSAGES[1]}
    asked = sorted(b["question"] for p, b in sent if p == "/v1/collections/c1/ask")
    assert asked == ["q3", "q4"]  # round 2's share of the collection's questions
    assert all(b["max_tokens"] == plan.max_tokens and b["stream"] for _, b in sent)
    assert len(calls) == 5 and all(c.ok and c.round == 2 for c in calls)
    assert {(c.prompt_tokens, c.cached_tokens) for c in calls} == {(100, 90)}
    assert load.home == {"s1": "replica-1", "s2": "replica-1", "s3": "replica-1", "c1": "replica-2"}
    assert load.inflight == {}
    assert all(c.t0 <= c.t1 for c in calls)


def test_a_failed_request_is_recorded_not_raised(sent):
    load = Workload(QUICK, "http://x")
    load.collections = [Collection("down", ["d"], ["q1", "q2"])]
    (call,) = load.round(1)
    assert (call.kind, call.key, call.ok) == ("question", "down", False)
    assert "503" in call.error and call.replica is None
    assert "down" not in load.home and load.inflight == {}


def test_the_replica_header_reaches_the_result(sent):
    r = client.stream_session("http://x", "s1", "hi")
    assert r.replica == "replica-1"
