"""Two replicas behind nginx (tests/app/cluster/conftest.py): session affinity, failover after
`kill -9` with the KV restored from the shared tier, a turn dropped by a killed replica stored
once after nginx's retry, and SSE passed through unbuffered."""

from __future__ import annotations

import json
import threading

import httpx

from app.cache import state_file
from app.cache.state_file import StateFileError
from app.cluster.cluster import Cluster, Layout, Replica
from tests.eventually import eventually

TURN = {"max_tokens": 12, "temperature": 0}
HANG_GUARD_S = 300.0  # a hung wait fails instead of blocking the suite (not a timing check)


def new_session(cluster: Cluster) -> str:
    r = httpx.post(cluster.url + "/v1/sessions", json={})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def turn(cluster: Cluster, sid: str, content: str) -> httpx.Response:
    r = httpx.post(cluster.url + f"/v1/sessions/{sid}/messages", json={"content": content, **TURN})
    assert r.status_code == 200, r.text
    return r


def cached(r: httpx.Response) -> int:
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def replica_of(cluster: Cluster, r: httpx.Response) -> Replica:
    (found,) = [x for x in cluster.replicas if x.name == r.headers["x-replica"]]
    return found


def published(cluster: Cluster, replica: Replica, text: str, model: str) -> bool:
    """Whether the replica has written a KV state holding `text` to the shared tier (files
    appear whole: written aside, then renamed)."""
    for path in cluster.cache_dir.glob(f"{replica.name}-*.kvstate"):
        try:
            header = state_file.load_header(path, model)
        except (OSError, StateFileError):
            continue  # evicted meanwhile
        tokens = [t for t in header.tokens.tokens if t >= 0]
        r = httpx.post(replica.url + "/detokenize", json={"tokens": tokens})
        if r.status_code == 200 and text in r.json()["content"]:
            return True
    return False


def wait_published(cluster: Cluster, replica: Replica, text: str, model_path: str) -> None:
    """Until the replica's writer thread has put a finished turn's KV on the shared tier."""
    model = state_file.cached_fingerprint(model_path)
    eventually(lambda: published(cluster, replica, text, model), "the turn's KV to be published")


def test_a_sessions_turns_land_on_one_replica_and_reuse_its_kv(cluster: Cluster):
    sid = new_session(cluster)
    replies = [turn(cluster, sid, f"Name a fruit that is {c}.") for c in ("red", "yellow", "green")]
    assert len({r.headers["x-replica"] for r in replies}) == 1
    assert all(r.headers["x-replica"].startswith("replica-") for r in replies)
    counts = [cached(r) for r in replies]
    # Each turn reuses the whole conversation before it: more cached turn by turn.
    assert counts[0] < counts[1] < counts[2]
    assert counts[2] >= replies[1].json()["usage"]["prompt_tokens"]


def test_the_session_header_keys_affinity_for_routes_without_the_id(cluster: Cluster):
    sid = new_session(cluster)
    by_path = turn(cluster, sid, "Say hello.").headers["x-replica"]
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    for _ in range(4):
        r = httpx.post(
            cluster.url + "/v1/chat/completions", json=body, headers={"X-Session-Id": sid}
        )
        assert r.status_code == 200, r.text
        assert r.headers["x-replica"] == by_path


def test_kill_9_of_a_sessions_replica_fails_over_with_history_and_kv(
    cluster: Cluster, model_path: str
):
    sid = new_session(cluster)
    asked = ["Name a color.", "Name an animal."]
    first = turn(cluster, sid, asked[0])
    holder = replica_of(cluster, first)
    second = turn(cluster, sid, asked[1])
    assert replica_of(cluster, second) is holder
    # Written on the replica's writer thread once the turn ended: wait for it.
    wait_published(cluster, holder, asked[1], model_path)
    holder.proc.kill()  # SIGKILL: nothing is saved or flushed on the way out
    holder.proc.wait()
    try:
        asked.append("Name a tree.")
        third = turn(cluster, sid, asked[2])  # nginx: refused by the dead one, sent on
        assert third.headers["x-replica"] != holder.name
        # Restored from the shared tier, not recomputed: the other replica never saw this
        # session, and it reuses at least the whole conversation before this turn.
        assert cached(third) >= second.json()["usage"]["prompt_tokens"]
        stored = httpx.get(cluster.url + f"/v1/sessions/{sid}").json()["messages"]
        replies = [r.json()["choices"][0]["message"]["content"] for r in (first, second, third)]
        expected = [m for pair in zip(asked, replies, strict=True) for m in pair]
        assert [m["role"] for m in stored] == ["user", "assistant"] * 3
        assert [m["content"] for m in stored] == expected
    finally:
        cluster.start_replica(holder)  # the next tests have two replicas again
        cluster.wait_healthy([holder], HANG_GUARD_S)
        wait_routed_to(cluster, holder)


def test_a_turn_a_killed_replica_dropped_is_stored_once_after_nginx_sends_it_on(
    cluster: Cluster,
):
    """kill -9 while the reply is generated (the user message stored, nothing sent back):
    nginx sends the request on with the Idempotency-Key it set, and the next replica answers
    the stored message instead of storing a second copy. The client sends no key."""
    sid = new_session(cluster)
    first = turn(cluster, sid, "Name a color.")
    holder = replica_of(cluster, first)
    long_turn = {"content": "Count to a thousand.", "max_tokens": 200, "ignore_eos": True}
    path = f"/v1/sessions/{sid}/messages"
    answered: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: answered.append(httpx.post(cluster.url + path, json=long_turn))
    )
    sender.start()
    try:
        eventually(
            lambda: (
                len(httpx.get(holder.url + f"/v1/sessions/{sid}").json()["messages"]) == 3
                and httpx.get(holder.url + "/health").json()["slots_processing"]
            ),
            "the long turn to start generating",
        )
        holder.proc.kill()  # SIGKILL mid-reply: its hold on the key is never let go
        holder.proc.wait()
        sender.join()
        (r,) = answered
        assert r.status_code == 200, r.text
        assert r.headers["x-replica"] != holder.name
        stored = httpx.get(cluster.url + f"/v1/sessions/{sid}").json()["messages"]
        assert [m["role"] for m in stored] == ["user", "assistant"] * 2
        assert [m["content"] for m in stored if m["role"] == "user"] == [
            "Name a color.",
            long_turn["content"],
        ]
        assert stored[-1]["content"] == r.json()["choices"][0]["message"]["content"]
    finally:
        sender.join()
        cluster.start_replica(holder)
        cluster.wait_healthy([holder], HANG_GUARD_S)
        wait_routed_to(cluster, holder)


def wait_routed_to(cluster: Cluster, replica: Replica) -> None:
    """Until nginx sends requests to the replica again (it skips one that failed for a while)."""
    eventually(
        lambda: httpx.get(cluster.url + "/health").headers["x-replica"] == replica.name,
        f"nginx to go back to {replica.name}",
    )


def test_sse_streams_through_nginx_unbuffered(cluster: Cluster):
    """The first event arrives while the generation still runs (nginx does not hold the
    stream back until its end): the replica reports the slot busy after that event."""
    body = {
        "messages": [{"role": "user", "content": "Count from one to a thousand."}],
        "max_tokens": 2000,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", cluster.url + "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        replica = replica_of(cluster, r)
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[len("data: ") :])["object"] == "chat.completion.chunk"
        health = httpx.get(replica.url + "/health").json()
        # Still queued or generating: this is not the end.
        assert health["slots_processing"] + health["queue"] >= 1, (health, replica.name)
    # nginx reads the replica's X-Accel-Buffering (and does not pass it on): it is there.
    short = {**body, "max_tokens": 2}
    with httpx.stream("POST", replica.url + "/v1/chat/completions", json=short) as direct:
        assert direct.headers["x-accel-buffering"] == "no"
        direct.read()
    # Closing the stream cancels the generation (through nginx too).
    eventually(
        lambda: not httpx.get(replica.url + "/health").json()["slots_processing"],
        "closing the stream to cancel the generation",
    )


def test_requests_without_an_affinity_key_are_spread_over_the_replicas(cluster: Cluster):
    seen = {httpx.get(cluster.url + "/health").headers["x-replica"] for _ in range(4)}
    assert seen == {r.name for r in cluster.replicas}


def test_a_collections_requests_land_on_one_replica(cluster: Cluster):
    for cid in ("c-one", "c-two", "c-three"):
        seen = {
            httpx.get(cluster.url + f"/v1/collections/{cid}/documents").headers["x-replica"]
            for _ in range(4)
        }
        assert len(seen) == 1, (cid, seen)


def test_replicas_answer_any_host_only_when_nginx_listens_beyond_loopback(tmp_path):
    """nginx passes the client's Host on: replicas on loopback keep their DNS-rebinding check
    unless nginx itself listens where other names reach it."""
    local = Cluster(Layout(9000, 1, tmp_path, "sqlite://"))
    assert "--allowed-hosts" not in local.replicas[0].command
    public = Cluster(Layout(9000, 1, tmp_path, "sqlite://", ["-np", "1"], host="0.0.0.0"))
    assert public.replicas[0].command[-4:] == ["--allowed-hosts", "*", "-np", "1"]
