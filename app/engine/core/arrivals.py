"""`Arrivals`: generation requests the HTTP layer has received and not yet submitted.

When several users send at once, the first request to reach the engine would otherwise start its
prefill alone: parsing, templating and tokenizing the others takes the event loop a few ms each
(longer once a decode holds both cores), so they arrive one decode later and are prefilled in a
second batch while the first waits for them: the others' first tokens come a whole lone prefill
later than one batch of all would give them, and the next wave repeats the split because the
lone request finishes a step before the others (figures: docs/kv-reuse.md, Measurements).

So the HTTP layer takes a ticket when a generation request arrives (`expect`); `Engine.submit`
settles it as it queues the request's task, and the HTTP layer settles it when the request ends
otherwise (`Arrival.settle`, idempotent). An idle engine about to prefill waits, for at most its
burst wait, while tickets are pending and slots are free (`EngineLoop._gather`). A lone request
pends nothing and never waits.

Thread-safe: tickets are taken and settled on the event loop, read on the engine thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Arrival:
    """One request's ticket: pending until settled."""

    __slots__ = ("_arrivals", "_settled")

    def __init__(self, arrivals: Arrivals) -> None:
        self._arrivals = arrivals
        self._settled = False

    def settle(self) -> None:
        """The request was submitted (its task is in the engine's inbox) or will never be."""
        if not self._settled:
            self._settled = True
            self._arrivals.settle_one()


class Arrivals:
    def __init__(self, wake: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._pending = 0  # invariant: tickets taken and not yet settled, >= 0
        self._wake = wake  # wakes the engine loop, which may be waiting for this one

    @property
    def pending(self) -> int:
        return self._pending

    def expect(self) -> Arrival:
        with self._lock:
            self._pending += 1
        return Arrival(self)

    def settle_one(self) -> None:
        """One ticket settled (`Arrival.settle` calls it, once per ticket)."""
        with self._lock:
            self._pending -= 1
        self._wake()
