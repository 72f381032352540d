"""`EngineStream`: one request's events, delivered from the engine thread to the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from app.engine.events import Event, Failed, Finished
from app.engine.request import GenerationRequest

if TYPE_CHECKING:
    from app.engine.engine import Engine


class EngineStream:
    """Async iterator over one request's events; cancels the task if abandoned."""

    def __init__(self, engine: Engine, request: GenerationRequest) -> None:
        self._engine = engine
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._finished = False
        self.submitted_at = time.perf_counter()
        self.task = engine.submit(request, self._deliver)

    def _deliver(self, event: Event) -> None:  # engine thread
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # event loop closed: nobody is listening any more
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
