"""`StreamStore`: one stream per conversation and tenant, its bounds and its expiry, on a
clock the test moves (the real server's paths: test_stream_routes.py)."""

from __future__ import annotations

import asyncio

import pytest

from app.api.llama_server.stream_store import StreamLimits, StreamStore
from app.engine.request import RequestError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(per_tenant: int = 2, total: int = 3, ttl: float = 300.0) -> tuple[StreamStore, Clock]:
    clock = Clock()
    return StreamStore(StreamLimits(per_tenant, total, 1024, ttl), clock), clock


def test_streams_are_kept_per_tenant():
    async def run() -> None:
        s, _ = store()
        mine = s.open("alice", "c")
        assert s.get("alice", "c") is mine
        assert s.get("bob", "c") is None
        s.stop("bob", "c")  # another tenant's stop reaches nothing
        assert s.get("alice", "c") is mine and not mine.done
        assert s.lookup("bob", ["c"]) == []
        assert s.lookup("alice", ["c"]) == [mine]

    asyncio.run(run())


def test_a_newer_stream_of_a_conversation_stops_the_older():
    async def run() -> None:
        s, _ = store(per_tenant=1)
        older = s.open("t", "c")
        newer = s.open("t", "c")  # no room needed: it takes the older's place
        assert older.done and not newer.done
        assert s.get("t", "c") is newer

    asyncio.run(run())


def test_a_kept_stream_is_pending_until_its_generation_starts():
    async def run() -> None:
        s, _ = store()
        held = s.open("t", "c")
        assert held.pending  # GET /v1/stream answers 503, retry later
        s.drop(held)  # its request failed before it started
        assert s.get("t", "c") is None and held.done

    asyncio.run(run())


def test_finished_streams_expire_after_the_ttl():
    async def run() -> None:
        s, clock = store(ttl=300.0)
        done, running = s.open("t", "done"), s.open("t", "running")
        done.finish()
        clock.now += 299.0
        assert s.get("t", "done") is done
        clock.now += 1.0
        assert s.get("t", "done") is None
        clock.now += 10_000.0
        assert s.get("t", "running") is running  # a running stream never expires

    asyncio.run(run())


def test_the_oldest_finished_stream_gives_its_place_else_a_refusal():
    async def run() -> None:
        s, clock = store(per_tenant=2, total=3)
        first, second = s.open("t", "1"), s.open("t", "2")
        with pytest.raises(RequestError) as refused:
            s.open("t", "3")
        assert (refused.value.status, refused.value.code) == (429, "too_many_streams")
        assert refused.value.headers == {"Retry-After": "1"}
        second.finish()
        clock.now += 1
        first.finish()
        s.open("t", "3")
        assert s.get("t", "2") is None and s.get("t", "1") is first  # the older end goes

        s.open("u", "1")  # three on the server, all running but t's "1"
        s.open("v", "1")  # takes t's finished "1"
        assert s.get("t", "1") is None
        with pytest.raises(RequestError) as full:
            s.open("w", "1")
        assert (full.value.status, full.value.code) == (503, "unavailable")

    asyncio.run(run())


def test_lookup_names_a_conversation_and_its_models_streams():
    async def run() -> None:
        s, _ = store(per_tenant=3)
        a, b = s.open("t", "c::m1"), s.open("t", "c::org/m2")
        s.open("t", "cc")
        assert s.lookup("t", ["c", "c::m1"]) == [a, b]

    asyncio.run(run())


def test_close_stops_everything():
    async def run() -> None:
        s, _ = store()
        a = s.open("t", "1")
        s.close()
        assert a.done and s.get("t", "1") is None

    asyncio.run(run())
