"""`QuietGate`: whether client requests are being served, for background work to wait on.

Background work outside the engine thread (embedding documents) takes cores a client request
needs, so it waits while a generation request is being received (an arrival ticket is pending),
queued or run. The engine loop opens the gate when it finds no client work and closes it when it
finds some; `Engine.submit` closes it as a client task goes in, so a worker never starts a batch
between a request's submission and the loop's next look.
"""

from __future__ import annotations

import threading
import time

from app.engine.core.arrivals import Arrivals

POLL_S = 0.05  # how often a waiter looks again while a request is being received


class QuietGate:
    def __init__(self, arrivals: Arrivals) -> None:
        self._arrivals = arrivals
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._waiting = 0  # threads in `wait`, under _lock

    def set(self, quiet: bool) -> None:
        """No client work (True: the engine loop's finding), or some (a client task was just
        submitted, or the loop found one)."""
        if quiet:
            self._open.set()
        else:
            self._open.clear()

    @property
    def quiet(self) -> bool:
        return self._open.is_set() and not self._arrivals.pending

    @property
    def n_waiting(self) -> int:
        """Threads waiting in `wait` now."""
        return self._waiting

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no client request is being received, queued or run; False if `timeout`
        seconds passed first."""
        if self.quiet:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._waiting += 1
        try:
            while not self.quiet:
                left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                if left <= 0:
                    return False
                if self._open.is_set():
                    time.sleep(left)  # a request is being received: it will submit or settle
                else:
                    self._open.wait(left)
            return True
        finally:
            with self._lock:
                self._waiting -= 1
