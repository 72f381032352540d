"""`Outbox` against a real event loop in its own thread (the HTTP side), no model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from app.engine.core.outbox import Outbox
from app.engine.events import Failed, Finished, TextDelta, Timings


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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_events_wait_for_the_interval_and_ends_go_at_once():
    with loop_thread() as loop:
        reader = reader_on(loop)
        clock = Clock()
        outbox = Outbox(first_wait_s=60.0, interval_s=0.025, clock=clock)

        def texts() -> list[str]:
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result()
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result()
            return [getattr(e, "text", type(e).__name__) for e in reader.read]

        outbox.post(reader, TextDelta("a", [1]), first=True)  # type: ignore[arg-type]
        outbox.flush_due()  # a first event goes at once
        assert texts() == ["a"]
        clock.now = 0.010
        outbox.post(reader, TextDelta("b", [2]))  # type: ignore[arg-type]
        outbox.flush_due()
        clock.now = 0.020
        outbox.post(reader, TextDelta("c", [3]))  # type: ignore[arg-type]
        outbox.flush_due()
        assert texts() == ["a"]  # held: the interval has not passed
        clock.now = 0.026
        outbox.flush_due()
        assert texts() == ["a", "b", "c"]  # together, in order
        clock.now = 0.030
        outbox.post(reader, TextDelta("d", [4]))  # type: ignore[arg-type]
        outbox.post(reader, Finished("stop", 1, 4, 0, Timings()))  # type: ignore[arg-type]
        outbox.flush_due()  # an end goes at once, with what waited before it
        assert texts() == ["a", "b", "c", "d", "Finished"]
        clock.now = 0.031
        outbox.post(reader, TextDelta("e", [5]))  # type: ignore[arg-type]
        outbox.flush()  # before a long step or sleeping: whatever the interval
        assert texts() == ["a", "b", "c", "d", "Finished", "e"]
        outbox.post(reader, Failed("boom"))  # type: ignore[arg-type]
        outbox.flush_due()
        assert texts()[-1] == "Failed"
