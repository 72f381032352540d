"""Retries and replicas, as an attacker (or an unlucky client) of a deployment with several
replicas on one database would have them: two server processes on one database file stand in
for two replicas (and one PostgreSQL database, when `make test` starts one).

- A session's turns run one at a time across replicas: a second turn on the other replica while
  one runs is a 409, and nothing of either is lost.
- A retry that takes over a dead replica's request never deletes the turns that came after its
  first try: it is refused (409, param Idempotency-Key) and every stored message stays.
- A stream that began with its 200 and then failed, or whose client went away, is not kept as
  the request's response: its retry runs it again instead of replaying it cut short.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from tests.db_urls import BACKENDS, fresh_database_url
from tests.eventually import eventually

LEASE = "2"  # --idempotency-lease: how long a killed replica's holds last
# Long enough to be cut short, killed or refused meanwhile (each test stops it one way).
LONG = {"content": "Count to a thousand.", "max_tokens": 1500, "ignore_eos": True}
SHORT = {"content": "Name a color.", "max_tokens": 4, "temperature": 0}


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database_url(request.param, tmp_path) as url:
        yield url


def replica(database: str, data: Path, name: str, *flags: str) -> ServerProcess:
    """A replica: its own data directory, the shared database."""
    return ServerProcess(
        "-np", "1", "-c", "4096", "--data-dir", str(data / name), "--database-url", database,
        "--replica-name", name, "--idempotency-lease", LEASE, "--doc-prefill-tokens", "0",
        *flags,
    )  # fmt: skip


def new_session(srv: ServerProcess) -> str:
    r = httpx.post(srv.base_url + "/v1/sessions", json={}, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def messages(srv: ServerProcess, sid: str) -> list[dict]:
    r = httpx.get(f"{srv.base_url}/v1/sessions/{sid}", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["messages"]


def turn(srv: ServerProcess, sid: str, body: dict, key: str | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    url = f"{srv.base_url}/v1/sessions/{sid}/messages"
    return httpx.post(url, json=body, headers=headers, timeout=120)


def generating(srv: ServerProcess) -> bool:
    return bool(httpx.get(srv.base_url + "/health", timeout=30).json()["slots_processing"])


def refusal(r: httpx.Response, status: int, param: str, code: str) -> str:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert (error["param"], error["code"]) == (param, code) and error["message"]
    return error["message"]


def test_two_replicas_never_run_turns_of_one_session_at_once(database: str, tmp_path: Path):
    with replica(database, tmp_path, "a") as a, replica(database, tmp_path, "b") as b:
        sid = new_session(a)
        url = f"{a.base_url}/v1/sessions/{sid}/messages"
        with httpx.stream("POST", url, json={**LONG, "stream": True}, timeout=60) as long:
            assert long.status_code == 200
            lines = long.iter_lines()  # kept: a dropped iterator closes the connection
            next(lines)  # it streams: its turn is taken, its message stored
            eventually(lambda: generating(a), "the long turn to generate")
            # The same session's next turn on the other replica, while that one runs.
            refusal(turn(b, sid, SHORT), 409, "session_id", "session_busy")
            assert [m["role"] for m in messages(b, sid)] == ["user"]
        # Its client went away: the turn ends, its reply stored as far as it came; then the
        # other replica's turn runs, after it.
        eventually(lambda: turn(b, sid, SHORT).status_code == 200, "the other turn to run")
        stored = messages(b, sid)
        assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
        assert [stored[0]["content"], stored[2]["content"]] == [LONG["content"], SHORT["content"]]
        assert stored[1]["status"] == "cancelled"


def test_a_late_retry_never_deletes_the_turns_that_came_after_it(database: str, tmp_path: Path):
    """Replica a is killed mid-reply of a keyed turn; the client goes on on replica b; the
    first turn's retry arrives late, on b: it must not replace the session from its message."""
    with replica(database, tmp_path, "b") as b:
        with replica(database, tmp_path, "a") as a:
            sid = new_session(a)
            cut: list[BaseException] = []

            def send() -> None:
                try:
                    turn(a, sid, LONG, key="late-1")
                except httpx.HTTPError as e:
                    cut.append(e)

            sender = threading.Thread(target=send)
            sender.start()
            eventually(lambda: len(messages(b, sid)) == 1, "the keyed message to be stored")
            eventually(lambda: generating(a), "its reply to start")
            assert a.proc is not None
            a.proc.kill()  # SIGKILL: its holds on the key and the session are never let go
            a.proc.wait()
            sender.join()
            assert cut, "the keyed turn was answered before the kill"
        # The client moves on without an answer: its next turn, on b, once a's hold ran out.
        eventually(lambda: turn(b, sid, SHORT).status_code == 200, "the next turn to run")
        before = messages(b, sid)
        assert [m["role"] for m in before] == ["user", "user", "assistant"]
        # The first turn's retry, late: refused, and nothing deleted.
        message = refusal(
            turn(b, sid, LONG, key="late-1"), 409, "Idempotency-Key", "session_changed"
        )
        assert "other turns" in message
        assert messages(b, sid) == before
        # Another key is another turn, stored after them.
        assert turn(b, sid, SHORT, key="late-2").status_code == 200
        assert len(messages(b, sid)) == len(before) + 2


def test_a_stream_that_failed_after_its_200_is_not_replayed(tmp_path: Path):
    """--timeout cuts the stream after it began: its retry runs again, never replayed the
    failed stream as the request's response."""
    with replica(f"sqlite:///{tmp_path}/t.db", tmp_path, "a", "--timeout", "1") as a:
        sid = new_session(a)
        body = {**LONG, "stream": True}
        first = turn(a, sid, body, key="cut-1")
        assert first.status_code == 200 and '"error"' in first.text  # failed after the 200
        again = turn(a, sid, body, key="cut-1")
        assert again.status_code == 200
        assert "idempotent-replayed" not in again.headers  # run again, not replayed
        # It took its own first try over: the message is stored once.
        assert [m["content"] for m in messages(a, sid) if m["role"] == "user"] == [LONG["content"]]


def test_a_stream_whose_client_went_away_is_not_replayed(tmp_path: Path):
    with replica(f"sqlite:///{tmp_path}/t.db", tmp_path, "a") as a:
        sid = new_session(a)
        url = f"{a.base_url}/v1/sessions/{sid}/messages"
        headers = {"Idempotency-Key": "gone-1"}
        body = {**LONG, "max_tokens": 300, "stream": True}
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as r:
            assert r.status_code == 200
            next(r.iter_lines())  # the 200 and a first event, then the client goes away
        eventually(lambda: len(messages(a, sid)) == 2, "the cut-short reply to be stored")
        again = turn(a, sid, body, key="gone-1")
        assert again.status_code == 200, again.text
        assert "idempotent-replayed" not in again.headers
        assert again.text.rstrip().endswith("data: [DONE]")
        stored = messages(a, sid)
        assert [m["role"] for m in stored] == ["user", "assistant"]
        assert stored[1]["status"] == "complete"
