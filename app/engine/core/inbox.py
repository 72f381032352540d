"""`Inbox`: what other threads hand the engine thread (tasks to run, calls to make between steps).

Any thread puts; the engine thread takes everything at once at the top of its loop. One lock
covers the lists and the closed flag: a put after `close()` raises (a call's future fails with)
the 503 the caller passes on, and what was put before is in the engine's last `take`, which
fails it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from app.engine.core.arrivals import Arrival
from app.engine.request import RequestError
from app.engine.task import Task


@dataclass(slots=True)
class Call:
    fn: Callable[[], object]
    future: Future
    needs_model: bool  # a sleeping model is loaded before it runs (app/engine/core/model_sleep.py)


def shutting_down() -> RequestError:
    return RequestError("the server is shutting down", code="unavailable", status=503)


class Inbox:
    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake  # wakes the engine loop
        self._lock = threading.Lock()
        self._tasks: list[Task] = []
        self._calls: list[Call] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        """Tasks put and not yet taken (read without the lock: a snapshot)."""
        return len(self._tasks)

    def tasks(self) -> list[Task]:
        """The tasks put and not yet taken (any thread: a copy)."""
        with self._lock:
            return list(self._tasks)

    def put_task(
        self,
        task: Task,
        check_room: Callable[[list[Task]], None] | None = None,
        arrival: Arrival | None = None,
    ) -> None:
        """Queue a task; `check_room(tasks in the inbox)` may refuse it (raises, nothing put).
        `arrival`: the request's ticket, settled as the task goes in (the engine never sees it
        pending with the task here)."""
        with self._lock:
            if self._closed:
                raise shutting_down()
            if check_room is not None:
                check_room(self._tasks)
            self._tasks.append(task)
            if arrival is not None:
                arrival.settle()
        self._wake()

    def check(self, check_room: Callable[[list[Task]], None]) -> None:
        """Raise what `put_task` would raise now, putting nothing."""
        with self._lock:
            if self._closed:
                raise shutting_down()
            check_room(self._tasks)

    def put_call(self, fn: Callable[[], object], needs_model: bool = True) -> Future:
        """Run fn on the engine thread between steps; its future fails once the engine stops.
        `needs_model`: fn touches the model (a sleeping one is loaded first); False for reads of
        Python state, which must not wake it."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                future.set_exception(shutting_down())
                return future
            self._calls.append(Call(fn, future, needs_model))
        self._wake()
        return future

    def take(self) -> tuple[list[Task], list[Call]]:
        """Everything put so far, in order (engine thread)."""
        with self._lock:
            tasks, self._tasks = self._tasks, []
            calls, self._calls = self._calls, []
        return tasks, calls

    def close(self) -> None:
        """Refuse every later put (idempotent); what is in stays for the engine's last `take`."""
        with self._lock:
            self._closed = True
