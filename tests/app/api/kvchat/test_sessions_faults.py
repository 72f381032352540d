"""Load and faults through real server processes: a 1-slot server shared by two sessions, a
bounded queue, a time limit, graceful shutdown, and kill -9 in the middle of a reply."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from tests.db_urls import fresh_database_url
from tests.eventually import eventually

SLOW = {"max_tokens": 400, "ignore_eos": True, "temperature": 0}


def start(data: Path, url: str, *flags: str) -> ServerProcess:
    args = ["-np", "1", "-c", "2048", "--data-dir", str(data), "--database-url", url, *flags]
    return ServerProcess(*args).start()


def session(srv: ServerProcess, **body) -> str:
    r = httpx.post(f"{srv.base_url}/v1/sessions", json=body, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def say(srv: ServerProcess, sid: str, text: str, **fields) -> httpx.Response:
    body = {"content": text, "max_tokens": 12, "temperature": 0, **fields}
    return httpx.post(f"{srv.base_url}/v1/sessions/{sid}/messages", json=body, timeout=120)


def messages(srv: ServerProcess, sid: str) -> list[dict]:
    return httpx.get(f"{srv.base_url}/v1/sessions/{sid}", timeout=30).json()["messages"]


class OpenStream:
    """A long streamed reply, held open after its first text (the client stays connected)."""

    def __init__(self, srv: ServerProcess, sid: str, text: str) -> None:
        self.client = httpx.Client(timeout=120)
        req = self.client.build_request(
            "POST",
            f"{srv.base_url}/v1/sessions/{sid}/messages",
            json={"content": text, "stream": True, **SLOW},
        )
        self.response = self.client.send(req, stream=True)
        # Kept referenced: a dropped line iterator would close the response (a disconnect).
        self.lines = self.response.iter_lines()
        for line in self.lines:
            if line.startswith("data: ") and '"content"' in line:
                chunk = json.loads(line[6:])
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    return
        raise AssertionError("no text streamed")

    def close(self) -> None:
        self.response.close()
        self.client.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_kill_9_mid_reply_keeps_every_completed_message(backend: str, tmp_path: Path):
    with fresh_database_url(backend, tmp_path) as url:
        srv = start(tmp_path, url)
        try:
            sid = session(srv, system_prompt="Be brief.")
            first = say(srv, sid, "Name a colour.").json()
            held = OpenStream(srv, sid, "Now write a long story.")
            srv.proc.send_signal(signal.SIGKILL)
            srv.proc.wait()
            held.close()
        finally:
            srv.stop()
        srv = start(tmp_path, url)
        try:
            stored = messages(srv, sid)
            assert [(m["role"], m["status"]) for m in stored[:2]] == [
                ("user", "complete"),
                ("assistant", "complete"),
            ]
            assert stored[0]["content"] == "Name a colour."
            assert stored[1]["content"] == first["choices"][0]["message"]["content"]
            # The user message of the interrupted turn was stored before generation began.
            assert stored[2]["content"] == "Now write a long story."
            assert all(m["role"] != "assistant" or m["status"] == "complete" for m in stored)
            # The conversation goes on.
            assert say(srv, sid, "Name another colour.").status_code == 200
            assert len(messages(srv, sid)) == len(stored) + 2
        finally:
            srv.stop()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_sessions_interleaved_on_one_slot_both_finish(backend: str, tmp_path: Path):
    with fresh_database_url(backend, tmp_path) as url:
        srv = start(tmp_path, url)
        try:
            system = "You are a helpful assistant. " * 12  # long enough to be worth saving
            a, b = session(srv, system_prompt=system), session(srv, system_prompt=system + "!")
            last: dict[str, dict] = {}
            for turn in range(2):
                for sid in (a, b):
                    r = say(srv, sid, f"Turn {turn}: tell me a fact.")
                    assert r.status_code == 200, r.text
                    usage = r.json()["usage"]
                    if turn == 1:  # the other session took the slot; its history came back
                        history = last[sid]["prompt_tokens"] + last[sid]["completion_tokens"]
                        cached = usage["prompt_tokens_details"]["cached_tokens"]
                        assert cached >= history - 1, (cached, history)
                    last[sid] = usage
            for sid in (a, b):
                stored = messages(srv, sid)
                assert [m["role"] for m in stored] == ["user", "assistant"] * 2
                assert all(m["status"] == "complete" and m["content"] for m in stored)
        finally:
            srv.stop()


def test_sigterm_cancels_a_reply_and_records_it(tmp_path: Path):
    with fresh_database_url("sqlite", tmp_path) as url:
        srv = start(tmp_path, url, "--shutdown-grace", "0.5")
        try:
            sid = session(srv)
            held = OpenStream(srv, sid, "Write a long story.")
            srv.proc.send_signal(signal.SIGTERM)  # the client stays connected meanwhile
            assert srv.proc.wait(timeout=60) is not None
            held.close()
        finally:
            srv.stop()
        srv = start(tmp_path, url)
        try:
            stored = messages(srv, sid)
            assert [m["role"] for m in stored] == ["user", "assistant"]
            assert stored[1]["status"] == "cancelled" and stored[1]["content"]
        finally:
            srv.stop()


def test_a_full_queue_answers_503_with_retry_after(tmp_path: Path):
    with fresh_database_url("sqlite", tmp_path) as url:
        srv = start(tmp_path, url, "--max-queue", "1")
        # Long enough to outlast the checks below on any machine: up to the context size.
        long = {**SLOW, "max_tokens": 1900}
        body = {"messages": [{"role": "user", "content": "Tell a story."}], "stream": True, **long}
        chat = f"{srv.base_url}/v1/chat/completions"
        stop = threading.Event()

        def hold() -> None:  # keeps a request open (running or waiting) until told to stop
            with httpx.stream("POST", chat, json=body, timeout=120) as r:
                for _ in r.iter_lines():
                    if stop.is_set():
                        return

        def health() -> dict:
            return httpx.get(f"{srv.base_url}/health").json()

        threads = [threading.Thread(target=hold) for _ in range(2)]
        try:
            # One after the other: the first runs, then the second fills the queue.
            threads[0].start()
            eventually(lambda: health()["slots_processing"] >= 1, "the first request to run")
            threads[1].start()
            eventually(lambda: health()["queue"] >= 1, "the second request to wait")
            r = httpx.post(chat, json={**body, "stream": False}, timeout=30)
            assert r.status_code == 503
            assert int(r.headers["Retry-After"]) >= 1
            assert r.json()["error"]["code"] == "unavailable"
            # A session turn refused the same way leaves the session as it was.
            sid = session(srv)
            assert say(srv, sid, "Hello?").status_code == 503
            assert messages(srv, sid) == []
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
            srv.stop()


def test_a_request_over_the_time_limit_gets_504_and_is_recorded(tmp_path: Path):
    with fresh_database_url("sqlite", tmp_path) as url:
        # The limit leaves a short turn room to finish on a loaded machine; the long one could
        # not finish within it on a machine many times faster than this one.
        srv = start(tmp_path, url, "--timeout", "6", "-c", "4096")
        try:
            sid = session(srv)
            r = say(srv, sid, "Write a long story.", **{**SLOW, "max_tokens": 4000})
            assert r.status_code == 504
            assert r.json()["error"]["code"] == "timeout"
            stored = messages(srv, sid)
            assert stored[-1]["role"] == "assistant" and stored[-1]["status"] == "error"
            # The server still serves (a new session: a few tokens, well within the limit also
            # on a loaded machine, where the long history's turn might not be).
            assert say(srv, session(srv), "Hi", max_tokens=2).status_code == 200
        finally:
            srv.stop()
