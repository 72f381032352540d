"""`StreamBuffer`: readers from any offset, the byte bound, the producer's ends (the real
server's paths: test_stream_routes.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from app.api.llama_server.stream_buffer import OffsetLost, StreamBuffer


async def collect(buf: StreamBuffer, offset: int = 0) -> bytes:
    return b"".join([chunk async for chunk in buf.read(offset)])


def test_readers_get_the_bytes_from_their_offset_as_they_come():
    async def run() -> tuple[bytes, bytes]:
        buf = StreamBuffer("t", "c", 1024)
        early = asyncio.create_task(collect(buf))
        late = asyncio.create_task(collect(buf, 3))
        for part in (b"abc", b"def", b"g"):
            await asyncio.sleep(0)
            buf.append(part)
        buf.finish()
        return await early, await late

    assert asyncio.run(run()) == (b"abcdefg", b"defg")


def test_the_oldest_bytes_go_first_and_offsets_keep_their_meaning():
    async def run() -> None:
        buf = StreamBuffer("t", "c", 4)
        buf.append(b"abc")
        buf.append(b"def")
        assert (buf.dropped, buf.total, bytes(buf.data)) == (2, 6, b"cdef")
        buf.append(b"0123456789")  # one chunk over the bound: its tail
        assert (buf.dropped, buf.total, bytes(buf.data)) == (12, 16, b"6789")
        buf.finish()
        assert await collect(buf, 13) == b"789"
        with pytest.raises(OffsetLost) as lost:
            await collect(buf, 11)
        assert lost.value.dropped == 12

    asyncio.run(run())


def test_a_reader_that_falls_behind_is_told_so():
    async def run() -> bytes:
        buf = StreamBuffer("t", "c", 4)
        buf.append(b"ab")
        reader = buf.response(0).body_iterator
        first = await anext(reader)
        buf.append(b"cdefgh")  # "ab" and more dropped before the reader came back
        buf.finish()
        return first + b"".join([chunk async for chunk in reader])  # type: ignore[misc]

    out = asyncio.run(run())
    assert out.startswith(b"ab")
    error = json.loads(out[2:].decode().removeprefix("data: "))["error"]
    assert error["code"] == "stream_offset_lost"
    assert "fell behind" in error["message"]


def test_a_failing_producer_ends_the_stream_with_an_error_event():
    async def frames() -> AsyncIterator[str]:
        yield "data: 1\n\n"
        raise RuntimeError("boom")

    async def run() -> bytes:
        buf = StreamBuffer("t", "c", 1024)
        buf.start(frames())
        assert buf.pending is False
        return await collect(buf)

    out = asyncio.run(run())
    assert out.startswith(b"data: 1\n\n")
    assert json.loads(out[9:].decode().removeprefix("data: "))["error"]["code"] == "internal_error"


def test_stop_cancels_the_producer_and_wakes_readers():
    closed: list[bool] = []

    async def frames() -> AsyncIterator[str]:
        try:
            yield "data: 1\n\n"
            await asyncio.Event().wait()  # a generation that would never end
            yield "never"
        finally:
            closed.append(True)

    async def run() -> bytes:
        buf = StreamBuffer("t", "c", 1024)
        buf.start(frames())
        reader = asyncio.create_task(collect(buf))
        while buf.total == 0:
            await asyncio.sleep(0)
        buf.stop()
        out = await reader
        await asyncio.gather(buf.producer, return_exceptions=True)  # type: ignore[arg-type]
        assert buf.done and buf.completed_at > 0
        return out

    assert asyncio.run(run()) == b"data: 1\n\n"
    assert closed == [True]  # the generation's own clean-up ran (its slot freed)
