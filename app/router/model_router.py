"""`ModelRouter`: which models are loaded, loading them on request and unloading the least
recently used, as llama-server's router does.

Statuses: `unloaded` (no server yet, or its model asleep), `loading` (its server starting or its
model waking), `loaded`, `failed` (its server exited; the reason kept, an explicit load tries
again). At most `max_loaded` models are loading or loaded. A request that needs a model which is
not loaded queues (first come, first served); the first in the queue whose model needs room
unloads the least recently used loaded model that serves no request, or waits until one ends.
Requests for a model already loading wait for that load (one load, however many ask). A request
whose client leaves while it waits leaves the queue and unloads nothing.

Event-loop only (one asyncio loop): every change of state notifies the waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from app.router.child_server import ChildServer
from app.router.model_catalog import ModelSpec

log = logging.getLogger(__name__)

UNLOADED, LOADING, LOADED, FAILED = "unloaded", "loading", "loaded", "failed"


class RouterError(Exception):
    """A request the router refuses, in the API's error shape."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.code = status, code


@dataclass(slots=True, eq=False)
class ModelEntry:
    spec: ModelSpec
    status: str = UNLOADED
    child: ChildServer | None = None
    in_flight: int = 0  # requests forwarded to its server and not ended
    last_used: float = 0.0  # time.monotonic() of the last request given to it
    failure: str | None = None  # why it failed
    loads: int = 0  # loads started (a wake counts)
    load_seconds: float | None = None  # the last load's

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(slots=True, eq=False)
class _Waiter:
    entry: ModelEntry
    since: float = field(default_factory=time.monotonic)


class ModelRouter:
    def __init__(
        self,
        specs: dict[str, ModelSpec],
        max_loaded: int,
        autoload: bool,
        make_child: Callable[[ModelSpec], ChildServer],
    ) -> None:
        self.models = {name: ModelEntry(spec) for name, spec in specs.items()}
        self.max_loaded = max(1, max_loaded)
        self.autoload = autoload
        self._make_child = make_child
        self._client = httpx.AsyncClient()
        self._changed = asyncio.Condition()
        self._queue: list[_Waiter] = []  # requests waiting for room, in arrival order
        self._tasks: set[asyncio.Task] = set()

    # --- lookups --------------------------------------------------------------------------------

    def entry(self, name: str | None) -> ModelEntry:
        """The model named; RouterError (400, llama-server's words) if it is not served."""
        if not name:
            raise RouterError("model name is missing from the request")
        entry = self.models.get(name)
        if entry is None:
            raise RouterError(f"model '{name}' not found")
        self._check_alive(entry)
        return entry

    def _check_alive(self, entry: ModelEntry) -> None:
        child = entry.child
        started = child is not None and child.proc is not None
        if entry.status in (LOADED, UNLOADED) and started and not child.running:
            entry.status, entry.failure = FAILED, child.failure()  # its server exited since
            log.error("model %s: %s", entry.name, entry.failure)

    def default_model(self, required: bool) -> str:
        """The model of a request that names none: with one model served, that one. Else a
        request that runs a model must name it (RouterError); any other (sessions, media,
        collections: the database the models' servers share) goes to the model used last that is
        loaded, or the first one."""
        if len(self.models) == 1:
            return next(iter(self.models))
        if required:
            raise RouterError("model name is missing from the request")
        running = [e for e in self.models.values() if e.status in (LOADED, LOADING)]
        if running:
            return max(running, key=lambda e: e.last_used).name
        usable = [name for name, e in self.models.items() if e.status != FAILED]
        return usable[0] if usable else next(iter(self.models))

    def entries(self) -> list[ModelEntry]:
        for entry in self.models.values():
            self._check_alive(entry)
        return list(self.models.values())

    # --- requests -------------------------------------------------------------------------------

    async def acquire(self, name: str | None, autoload: bool | None = None) -> ModelEntry:
        """The named model, loaded, with one more request counted on it (`release` it when the
        response ends). Waits while it loads or while room is made for it."""
        entry = self.entry(name)
        autoload = self.autoload if autoload is None else autoload
        if entry.status != LOADED and entry.status != LOADING and not autoload:
            raise RouterError("model is not loaded")
        waiter = _Waiter(entry)
        async with self._changed:
            self._queue.append(waiter)
            try:
                while entry.status != LOADED:
                    self._check_alive(entry)
                    if entry.status == FAILED:
                        raise RouterError(
                            f"model '{entry.name}' failed to load: {entry.failure}", 503,
                            "unavailable",
                        )  # fmt: skip
                    if entry.status == UNLOADED and self._first_to_need_room(waiter):
                        self._start_load(entry)
                    await self._wait()
            finally:
                self._queue.remove(waiter)
                self._changed.notify_all()
            entry.in_flight += 1
            entry.last_used = time.monotonic()
            return entry

    async def release(self, entry: ModelEntry) -> None:
        async with self._changed:
            entry.in_flight -= 1
            entry.last_used = time.monotonic()
            self._changed.notify_all()

    async def _wait(self) -> None:
        """Until something changes, or a second passes (a model's server may have exited)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout=1.0)

    def _first_to_need_room(self, waiter: _Waiter) -> bool:
        """The earliest waiter whose model is unloaded (the others wait for a load already
        under way) takes the room that is free or can be made; the rest keep their turn."""
        first = next(w for w in self._queue if w.entry.status == UNLOADED)
        return first is waiter and self._make_room(waiter.entry)

    def _make_room(self, entry: ModelEntry) -> bool:
        """Room for one more loaded model: free already, or the least recently used loaded model
        that serves no request is unloaded. False: every loaded model is busy."""
        held = [e for e in self.models.values() if e.status in (LOADING, LOADED) and e is not entry]
        if len(held) < self.max_loaded:
            return True
        idle = [e for e in held if e.status == LOADED and e.in_flight == 0]
        if not idle:
            return False
        self._unload(min(idle, key=lambda e: e.last_used))
        return True

    # --- load and unload ------------------------------------------------------------------------

    async def load(self, name: str) -> None:
        """POST /models/load: the model loads as for a request, in the queue's order (room
        made, or waited for); a failed model is tried again. Returns at once: `/models` says
        how it goes."""
        entry = self.entry(name)
        if entry.status in (LOADED, LOADING):
            raise RouterError("model is already running")
        async with self._changed:
            if entry.status == FAILED:
                entry.status, entry.failure = UNLOADED, None
                if entry.child is not None and not entry.child.running:
                    entry.child = None  # a new server, not the one that exited
            if not self._queue and self._make_room(entry):
                self._start_load(entry)  # `loading` from now on
                self._changed.notify_all()
                return

        async def queued() -> None:  # after the requests that came first
            with contextlib.suppress(RouterError):  # failed: its status says why
                await self.release(await self.acquire(name, autoload=True))

        self._keep(asyncio.get_running_loop().create_task(queued()))

    async def unload(self, name: str) -> None:
        """POST /models/unload: the model sleeps once its running requests end."""
        entry = self.entry(name)
        if entry.status not in (LOADED, LOADING):
            raise RouterError("model is not running")
        async with self._changed:
            self._unload(entry)
            self._changed.notify_all()

    def _unload(self, entry: ModelEntry) -> None:
        if entry.child is not None:
            entry.child.sleep()
        entry.status = UNLOADED
        log.info("model %s unloaded (asleep: its KV stays in its cache tiers)", entry.name)

    def _start_load(self, entry: ModelEntry) -> None:
        entry.status, entry.failure = LOADING, None
        entry.loads += 1
        self._keep(asyncio.get_running_loop().create_task(self._load(entry)))

    def _keep(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load(self, entry: ModelEntry) -> None:
        started = time.monotonic()
        try:
            child = entry.child
            if child is None or not child.running:
                child = entry.child = self._make_child(entry.spec)
                child.start()
            else:
                child.wake()
            await child.ready(self._client, awake=True)
            status, failure = LOADED, None
        except Exception as e:  # never the router's end: the model is `failed`, with why
            log.error("model %s failed to load: %s", entry.name, e)
            if entry.child is not None:
                entry.child.stop(timeout=5.0)
            status, failure = FAILED, str(e)
        async with self._changed:
            if entry.status == LOADING:  # not unloaded meanwhile
                entry.status, entry.failure = status, failure
                entry.load_seconds = time.monotonic() - started
                entry.last_used = time.monotonic()
            self._changed.notify_all()

    async def forget(self, name: str) -> None:
        """DELETE /models: the model leaves the list (its server stopped) until a reload finds
        it again; its files stay (llama-server deletes downloaded files: nothing here was
        downloaded)."""
        entry = self.entry(name)
        if entry.in_flight:
            raise RouterError("model is serving requests", 409, "conflict")
        async with self._changed:
            del self.models[name]
            self._changed.notify_all()
        if entry.child is not None:
            await asyncio.to_thread(entry.child.stop)

    async def reload(self, specs: dict[str, ModelSpec]) -> None:
        """GET /models?reload=1: the catalogue read again. New models are added, models gone
        from it are stopped and dropped, a model whose files or flags changed is stopped (its
        next load starts its server anew)."""
        stale = [e for n, e in self.models.items() if n not in specs or specs[n] != e.spec]
        for entry in stale:
            if entry.child is not None and not entry.in_flight:
                await asyncio.to_thread(entry.child.stop)
        async with self._changed:
            kept = {n: e for n, e in self.models.items() if n in specs and e not in stale}
            self.models = {n: kept.get(n) or ModelEntry(spec) for n, spec in specs.items()}
            self._changed.notify_all()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for entry in self.models.values():
            if entry.child is not None:
                await asyncio.to_thread(entry.child.stop)
        await self._client.aclose()
