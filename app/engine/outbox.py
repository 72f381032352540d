"""`Outbox`: events of one engine step, handed to each event loop in a single wake-up.

`loop.call_soon_threadsafe` writes to the loop's self-pipe: one call per token per stream would
wake the HTTP event loop (and switch threads under the GIL) once for every token of every
stream. The engine thread posts events here while it works and flushes once per step, so a
loop wakes once per step for all its streams, whatever their number.

Engine thread only; the hand-over runs on each loop.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.engine.events import Event

if TYPE_CHECKING:
    from app.engine.stream import EngineStream


class Outbox:
    def __init__(self) -> None:
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[EngineStream, Event]]] = {}

    def post(self, stream: EngineStream, event: Event) -> None:
        self._pending.setdefault(stream.loop, []).append((stream, event))

    def flush(self) -> None:
        """Hand every posted event to its loop, in order (one call per loop)."""
        pending, self._pending = self._pending, {}
        for loop, items in pending.items():
            try:
                loop.call_soon_threadsafe(_hand_over, items)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                for stream, _ in items:
                    stream.abandon()


def _hand_over(items: list[tuple[EngineStream, Event]]) -> None:
    for stream, event in items:
        stream.receive(event)
