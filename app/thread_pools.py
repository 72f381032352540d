"""`ThreadPools`: worker threads by kind of work, so that one kind cannot starve the others.

Blocking work runs off the event loop in threads. asyncio's default pool (`asyncio.to_thread`)
is what API key lookups and database calls use; it is small (min(32, cores + 4) threads), so
work that may wait long must not run there: 20 PDF uploads waiting for PDFium's one-at-a-time
lock, or image fetches trickling in, would hold every thread of it and every key lookup would
wait behind them. Such work runs in a pool of its own:

- `parse`: document uploads parsed (PDF, DOCX, HTML);
- `images`: images decoded and image prompts built;
- `fetch`: the host-name lookups of remote fetches (app/outbound/), whose transfer itself is
  asynchronous and holds no thread.

Each pool has a fixed number of threads and a bound on the tasks waiting for one: past it the
request is refused at once (`PoolBusy`, a 503 with Retry-After) instead of queueing without end.
A task counts until its thread is done with it, also when the request that waited for it is gone.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class PoolBusy(Exception):
    """A pool's threads are all busy and its queue is full: 503, try again shortly."""

    def __init__(self, pool: str, what: str) -> None:
        super().__init__(f"the server is busy {what}; retry shortly")
        self.pool = pool
        self.message = str(self)


class WorkerPool:
    """A bounded thread pool: `threads` threads, at most `queue` tasks waiting (0: no bound)."""

    def __init__(self, name: str, threads: int, queue: int, what: str) -> None:
        self.name = name
        self.threads = threads
        self.queue = queue
        self.what = what  # what its threads do, for the busy message ("parsing documents")
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix=f"pool-{name}")
        self._lock = threading.Lock()
        self._pending = 0  # running or waiting; a done callback (any thread) counts it out

    @property
    def pending(self) -> int:
        """Tasks running or waiting."""
        return self._pending

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on one of the pool's threads (with the caller's context
        variables, as `asyncio.to_thread`); PoolBusy if the queue is full."""
        with self._lock:
            if self.queue and self._pending >= self.threads + self.queue:
                raise PoolBusy(self.name, self.what)
            self._pending += 1
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        try:
            future: Future[T] = self._executor.submit(call)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)
        return await asyncio.wrap_future(future)

    def _done(self, _: Future[Any] | None) -> None:
        with self._lock:
            self._pending -= 1

    def shutdown(self) -> None:
        """Drop the waiting tasks; those running finish on their own."""
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(slots=True)
class ThreadPools:
    parse: WorkerPool  # document uploads parsed
    images: WorkerPool  # images decoded, image prompts built
    fetch: WorkerPool  # host names of remote fetches resolved

    @classmethod
    def build(cls, parse: int, images: int, fetch: int, queue: int) -> ThreadPools:
        return cls(
            WorkerPool("parse", parse, queue, "parsing documents"),
            WorkerPool("images", images, queue, "decoding images"),
            WorkerPool("fetch", fetch, queue, "looking up remote hosts"),
        )

    def shutdown(self) -> None:
        for pool in (self.parse, self.images, self.fetch):
            pool.shutdown()
