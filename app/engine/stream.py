"""`EngineStream`: one request's events, delivered from the engine thread to the event loop.

A streamed request gets its text deltas once per engine step (through the engine's `Outbox`); a
request answered in one piece gets nothing until it ends, then every delta and the terminal event
together: its event loop never wakes per token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Protocol

from app.engine.core.arrivals import Arrival
from app.engine.core.outbox import Outbox
from app.engine.events import Event, Failed, Finished, TextDelta
from app.engine.request import GenerationRequest
from app.engine.task import Sink, Task


class Submitter(Protocol):
    """What a stream needs of the engine (app/engine/engine.py's `Engine`)."""

    def submit(
        self, request: GenerationRequest, sink: Sink, arrival: Arrival | None = None
    ) -> Task: ...

    def cancel(self, task: Task) -> None: ...


class EngineStream:
    """Async iterator over one request's events; cancels the task if abandoned."""

    def __init__(
        self,
        engine: Submitter,
        outbox: Outbox,
        request: GenerationRequest,
        streaming: bool = True,
        arrival: Arrival | None = None,
    ) -> None:
        self._engine = engine
        self._outbox = outbox  # where the engine thread hands this stream's events over
        self.loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._finished = False
        self._streaming = streaming
        self._held: list[Event] = []  # engine thread: deltas of an unstreamed request
        self._posted = False  # engine thread: an event has gone to the outbox
        self.submitted_at = time.perf_counter()
        self.task = engine.submit(request, self._deliver, arrival)

    def _deliver(self, event: Event) -> None:  # engine thread
        if not self._streaming and isinstance(event, TextDelta):
            self._held.append(event)
            return
        held, self._held = self._held, []
        outbox, first = self._outbox, not self._posted
        self._posted = True
        for e in held:
            outbox.post(self, e, first)
        outbox.post(self, event, first)

    def receive(self, event: Event) -> None:  # event loop
        self._queue.put_nowait(event)

    def abandon(self) -> None:  # engine thread: the event loop is gone
        self._engine.cancel(self.task)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        try:
            while True:
                event = await self._queue.get()
                if isinstance(event, Finished | Failed):
                    self._finished = True
                yield event
                if self._finished:
                    return
        finally:
            if not self._finished:
                self.cancel()

    def cancel(self) -> None:
        if not self._finished:
            self._engine.cancel(self.task)
