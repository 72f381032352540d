"""`Outbox`: events of one engine step, handed to each event loop in a single wake-up.

`loop.call_soon_threadsafe` writes to the loop's self-pipe: one call per token per stream would
wake the HTTP event loop (and switch threads under the GIL) once for every token of every
stream. The engine thread posts events here while it works and flushes once per step, so a
loop wakes once per step for all its streams, whatever their number.

A request's first event is its time to first token. On CPU, after a flush that holds one, the
engine thread waits (at most FIRST_EVENT_WAIT_S) until its loop has had one turn with the
events, which sends them, before computing on: otherwise the next decode's OpenMP threads take
both cores while the event loop and the client need them to send and read that token (figures:
docs/kv-reuse.md, Measurements).

Each hand-over also costs the engine thread: the wake-up's write releases the GIL, the loop's
thread takes it, and the engine waits for it back while the loop formats and sends what it got.
So a step's token events wait (`flush_due`) until STREAM_INTERVAL_S has passed since the last
hand-over, and then go together; a first event, a request's end or failure goes at once, and
the engine loop hands everything over before what may take long (a step that prefills, an
admission) and before it sleeps. Each token is still its own event; a stream's tokens arrive
in small groups.

Engine thread only; the hand-over runs on each loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Protocol

from app.engine.events import Event, TextDelta

# The longest the engine waits for a loop to send a first token (a loop that is busy elsewhere
# must not stall every stream).
FIRST_EVENT_WAIT_S = 0.005
# Longest a token event waits for the next hand-over (figures: bench/results/speculation-notes.md,
# "The engine's hand-over to the HTTP thread").
STREAM_INTERVAL_S = 0.025


class Receiver(Protocol):
    """A request's event-loop side (app/engine/stream.py's `EngineStream`)."""

    loop: asyncio.AbstractEventLoop

    def receive(self, event: Event) -> None: ...  # on its loop

    def abandon(self) -> None: ...  # engine thread: its loop is closed


class Outbox:
    def __init__(
        self,
        first_wait_s: float = FIRST_EVENT_WAIT_S,
        interval_s: float = STREAM_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[Receiver, Event]]] = {}
        self._first = False  # a pending event is some request's first
        self._urgent = False  # a pending event is a first, an end or a failure
        self.first_wait_s = first_wait_s  # 0: never wait
        self.interval_s = interval_s  # 0: every flush_due hands over
        self._clock = clock
        self._last = clock()  # when events were last handed over

    def post(self, stream: Receiver, event: Event, first: bool = False) -> None:
        self._pending.setdefault(stream.loop, []).append((stream, event))
        self._first |= first
        self._urgent |= first or not isinstance(event, TextDelta)

    def flush_due(self) -> None:
        """Flush if an event must go now or the interval has passed since the last hand-over."""
        if self._urgent or self._clock() - self._last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        """Hand every posted event to its loop, in order (one call per loop); with a first
        event among them, wait until each loop has had its turn with them."""
        if not self._pending:
            return
        self._urgent, self._last = False, self._clock()
        pending, self._pending = self._pending, {}
        first, self._first = self._first and self.first_wait_s > 0, False
        sent: list[threading.Event] = []
        for loop, items in pending.items():
            done = threading.Event() if first else None
            try:
                loop.call_soon_threadsafe(_hand_over, loop, items, done)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                for stream, _ in items:
                    stream.abandon()
                continue
            if done is not None:
                sent.append(done)
        for done in sent:
            done.wait(self.first_wait_s)


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    items: list[tuple[Receiver, Event]],
    done: threading.Event | None,
) -> None:
    for stream, event in items:
        stream.receive(event)
    if done is not None:
        # Runs after the readers this woke have taken their turn (callbacks run in order).
        loop.call_soon(done.set)
