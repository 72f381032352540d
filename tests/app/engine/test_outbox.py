"""`Outbox` against a real event loop in its own thread (the HTTP side), no model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from app.engine.events import TextDelta
from app.engine.outbox import Outbox


class Reader:
    """A stream's event-loop side: a task that reads what the outbox hands over."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()
        self.read: list[object] = []  # appended by the reading task, on the loop

    def receive(self, event: object) -> None:
        self.queue.put_nowait(event)

    def abandon(self) -> None:
        raise AssertionError("the loop is running")

    async def run(self) -> None:
        while True:
            self.read.append(await self.queue.get())


@contextmanager
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        yield loop
    finally:

        async def cancel_readers() -> None:
            readers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_readers(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def reader_on(loop: asyncio.AbstractEventLoop) -> Reader:
    async def make() -> Reader:
        reader = Reader(loop)
        asyncio.ensure_future(reader.run())
        return reader

    return asyncio.run_coroutine_threadsafe(make(), loop).result()


def test_a_first_event_has_been_read_when_flush_returns():
    with loop_thread() as loop:
        reader = reader_on(loop)
        outbox = Outbox(first_wait_s=60.0)  # never reached: the loop is free
        for i in range(20):
            event = TextDelta(f"token {i}", [i])
            outbox.post(reader, event, first=True)  # type: ignore[arg-type]
            outbox.flush()
            # The reading task has had its turn: the token is on its way to the client.
            assert reader.read[-1] is event


def test_the_wait_for_a_busy_loop_is_bounded_and_later_events_do_not_wait():
    with loop_thread() as loop:
        reader = reader_on(loop)
        busy, release = threading.Event(), threading.Event()
        loop.call_soon_threadsafe(lambda: (busy.set(), release.wait()))
        busy.wait()
        outbox = Outbox(first_wait_s=0.05)
        outbox.post(reader, TextDelta("first", [1]), first=True)  # type: ignore[arg-type]
        outbox.flush()  # returns although the loop cannot run
        outbox.post(reader, TextDelta("second", [2]))  # type: ignore[arg-type]
        outbox.flush()
        assert reader.read == []
        release.set()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result()
        assert [e.text for e in reader.read] == ["first", "second"]  # type: ignore[attr-defined]
