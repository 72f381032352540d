"""`Engine`: one thread that owns the llama context and runs the scheduler loop.

The loop (app/engine/core/engine_loop.py) takes in submitted tasks, admits waiting ones to slots
(prefix reuse, parking idle KV) and runs one `Stepper` step (app/engine/core/stepper.py: plan,
llama_decode, sample) at a time. The outside enters through `Engine`'s methods only: it builds
its parts (app/engine/core/engine_parts.py) and hands out results, never the parts themselves.

The HTTP event loop never calls llama.cpp: it submits a Task and awaits its events, which the
engine thread hands over with `loop.call_soon_threadsafe`. `llama_decode` is a ctypes call, which
releases the GIL, so the event loop keeps serving while a batch is computed.

Every graph (warm-up, decode, the projector's warm-up and image encodes) runs on the engine thread
for the life of the process: `start()` opens the vision projector and warms up there, and the
model then refuses compute from any other thread (see app/engine/llama/model.py).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from app.cache.state_file import cached_fingerprint, model_identity
from app.engine.background_tasks import BackgroundTasks
from app.engine.core.arrivals import Arrival
from app.engine.core.engine_parts import build_parts
from app.engine.core.request_defaults import apply_defaults
from app.engine.core.slot import SlotInfo
from app.engine.decode_counts import DecodeCounts
from app.engine.engine_config import EngineConfig
from app.engine.engine_info import CacheStats, ModelInfo
from app.engine.kv.slot_files import SlotRestored, SlotSaved
from app.engine.llama.model import Model
from app.engine.request import GenerationRequest
from app.engine.stream import EngineStream
from app.engine.task import Sink, Task
from app.engine.tokenizer import ImageTokenizer, Tokenizer

log = logging.getLogger(__name__)


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        model: Model | None = None,
        on_cache_op: Callable[[str, str, float], None] | None = None,
    ) -> None:
        """`on_cache_op(op, tier, seconds)`: each cache-tier operation and KV compaction (the
        engine thread and tier threads call it)."""
        self._config = config
        self._model = model or Model(config)
        self._wake = threading.Event()  # set by whatever gives the engine thread work
        parts = build_parts(config, self._model, self.n_ctx_request, self._wake, on_cache_op)
        self._parts = parts  # kept whole for tests (tests/engine_parts.py), never handed out
        self._speculator, self._scheduler = parts.speculator, parts.scheduler
        self._arrivals, self._inbox, self._outbox = parts.arrivals, parts.inbox, parts.outbox
        self._reuse, self._blend, self._vision = parts.reuse, parts.blend, parts.vision
        self._stepper, self._compactor, self._loop = parts.stepper, parts.compactor, parts.loop
        self._quiet, self._slot_files = parts.quiet, parts.slot_files
        self._sleep = parts.sleep
        self._identity = f"m{model_identity(config.model_path, config.mmproj_path)}/"
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine thread; returns once it has claimed the model, opened the projector
        and warmed up (raises what that raised, e.g. a bad projector file)."""
        ready: Future = Future()
        self._thread = threading.Thread(
            target=self._main, args=(ready,), name="engine", daemon=True
        )
        self._thread.start()
        ready.result()

    def _main(self, ready: Future) -> None:
        try:
            self._model.compute.claim()
            if self._vision is not None:
                self._vision.open()
            if self._config.warmup:
                self._stepper.warmup()
        except BaseException as e:
            self._inbox.close()
            ready.set_exception(e)
            return
        self._sleep.last_active = time.monotonic()  # idle from now, not from the build
        ready.set_result(None)
        self._loop.run()

    @property
    def dead(self) -> bool:
        """The engine thread died: nothing will be served any more."""
        return self._loop.dead

    def stop(self, free: bool = True) -> None:
        """Stop the engine thread (queued and running requests fail with 503) and, unless
        free=False, free the model: the caller then frees it with `close()` once nothing that
        may still use the model (e.g. a response's end hooks) runs."""
        running = self._thread is not None and self._thread.is_alive()
        if self._reuse.disk is not None and running and not self._sleep.asleep:
            try:  # keep the slots' KV across the restart (a sleeping model saved it already)
                self.call(self._reuse.persist).result(timeout=60)
            except Exception:
                log.exception("could not save the slots' KV at shutdown")
        self._inbox.close()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            if self._thread.is_alive():  # still inside llama_decode: freeing now would crash
                log.error("engine thread did not stop; leaving the model loaded")
                return
        if self._reuse.disk is not None:
            self._reuse.disk.flush()
        if free:
            self.close()

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return  # still inside llama_decode: freeing now would crash
        if self._vision is not None:
            self._vision.close()
        self._stepper.close()
        self._blend.close()
        self._model.close()

    # --- submission (any thread) ----------------------------------------------------------------

    @property
    def n_ctx_request(self) -> int:
        """KV cells one request may use, prompt and reply (llama-server's per-slot n_ctx)."""
        # llama-server's unified KV lets one request use all of it; its per-slot KV, a share.
        slots = 1 if self._config.kv_unified else self._model.n_seq_max
        share = self._config.n_ctx_request or self._model.n_ctx // slots
        return max(1, min(share, self._model.n_ctx))

    def validate(self, request: GenerationRequest) -> None:
        """Check a request, its defaults and limits applied
        (app/engine/core/request_defaults.py)."""
        apply_defaults(request, self._config, self._model)
        request.cache_salt = self.keyed(request.cache_salt)
        request.check(
            self.n_ctx_request,
            self._model.n_vocab,
            len(self._scheduler.slots),
            self._vision is not None,
            self._model.n_ctx,
        )

    def submit(
        self, request: GenerationRequest, sink: Sink, arrival: Arrival | None = None
    ) -> Task:
        """Validate and queue; raises RequestError (nothing queued) on bad input. `arrival`: the
        request's ticket, settled as its task is queued (the engine never sees it pending with
        the task in the inbox, see `_gather`)."""
        self.validate(request)
        cache_prompt = (
            self._config.cache_prompt if request.cache_prompt is None else request.cache_prompt
        )
        task = Task(request, sink, cache_prompt)
        if self._config.request_timeout > 0 and not request.background:
            task.deadline = time.monotonic() + self._config.request_timeout
        check = None if request.background else self._check_queue_room
        if not request.background:
            self._quiet.set(False)
        self._inbox.put_task(task, check, arrival)
        return task

    def check_room(self) -> None:
        """Raise the 503 that `submit` would raise now (a caller about to store something)."""
        self._inbox.check(self._check_queue_room)

    def _check_queue_room(self, inbox: list[Task]) -> None:  # under the inbox's lock
        self._scheduler.check_queue_room(self._config.max_queue, inbox)

    def cancel(self, task: Task) -> None:
        task.cancelled = True
        self._wake.set()

    def call(self, fn: Callable[[], object], needs_model: bool = True) -> Future:
        """Run fn on the engine thread between steps (for state only it may touch); a sleeping
        model is loaded first unless `needs_model` is False (fn reads Python state only)."""
        return self._inbox.put_call(fn, needs_model)

    # --- sleep (llama-server's --sleep-idle-seconds) ---------------------------------------------

    @property
    def sleeping(self) -> bool:
        """The model is freed and not loading (any thread; `/props` `is_sleeping`)."""
        return self._sleep.sleeping

    @property
    def loaded(self) -> bool:
        """The model's weights are loaded: not asleep, and not still waking (any thread)."""
        return not self._sleep.asleep

    def touch(self) -> None:
        """Work is coming (any thread): the idle time starts again and a sleeping model starts
        loading."""
        self._sleep.touch()

    async def ready(self) -> None:
        """Until the model is loaded (a sleeping one is woken): before tokenizing images."""
        if self._sleep.asleep:
            await asyncio.wrap_future(self.call(lambda: None))

    async def sleep(self) -> None:
        """Free the model now, its slots' KV saved to the cache tiers (it loads again for the
        next work); RuntimeError while requests run or wait."""
        await asyncio.wrap_future(self.call(self._sleep_when_idle, needs_model=False))

    def open(
        self, request: GenerationRequest, streaming: bool = True, arrival: Arrival | None = None
    ) -> EngineStream:
        """Submit from the event loop; iterate the result for events. Raises RequestError.
        Not `streaming`: the text comes all at once with the end."""
        return EngineStream(self, self._outbox, request, streaming, arrival)

    def slots(self) -> list[SlotInfo]:
        return [slot.info() for slot in self._scheduler.slots]

    @property
    def n_waiting(self) -> int:
        return len(self._scheduler.waiting) + len(self._inbox)

    @property
    def n_slots(self) -> int:
        return len(self._scheduler.slots)

    @property
    def n_arriving(self) -> int:
        """Generation requests received and not yet submitted (app/engine/core/arrivals.py)."""
        return self._arrivals.pending

    def expect_arrival(self) -> Arrival:
        """A ticket for a generation request just received; settle it if it is never submitted."""
        return self._arrivals.expect()

    # --- what the outside may know and ask (event loop; any thread where said) -------------------

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's vocabulary (any thread): tokenize, detokenize, its chat template."""
        return self._model

    @property
    def images(self) -> ImageTokenizer | None:
        """The vision projector's marker and prompt tokenizing (any thread); None without a
        projector (--mmproj)."""
        return self._vision

    @property
    def model_fingerprint(self) -> str:
        """The model file's identity: slot saves and stored chunk token ids are keyed by it."""
        return cached_fingerprint(self._model.path)

    def decode_counts(self) -> DecodeCounts:
        """The client steps' llama_decode calls so far (any thread: a copy)."""
        return self._stepper.counts.copy()

    def _sleep_when_idle(self) -> None:  # engine thread
        if self._scheduler.has_work:
            raise RuntimeError("the model is busy")
        self._sleep.fall_asleep()

    def model_info(self) -> ModelInfo:
        m = self._model
        return ModelInfo(
            m.n_ctx,
            m.n_ctx_train,
            m.n_vocab,
            m.n_seq_max,
            self.n_ctx_request,
            self._blend.sink_tokens,
            self._blend.unavailable,
            self._blend.gate.forced,
            self._blend.gate.agreement.as_dict() if self._blend.gate.agreement else None,
            m.backends,
        )

    async def cache_stats(self) -> CacheStats:
        vision = self._vision

        def read() -> CacheStats:  # the counters change on the engine thread
            return CacheStats(self._reuse.snapshot(), vision.stats() if vision else None)

        return await asyncio.wrap_future(self.call(read, needs_model=False))

    async def reset_cache(self) -> None:
        """Drop every host and disk entry and the KV of every idle slot."""

        def reset() -> None:
            self._reuse.reset()
            self._speculator.reset()

        await asyncio.wrap_future(self.call(reset))

    async def forget_documents(self, document_ids: set[str]) -> None:
        """No cache tier serves these documents' chunks again (host, disk, slots)."""

        def forget() -> None:
            self._reuse.forget_documents(document_ids)
            self._speculator.forget(document_ids)  # replies on them draft nothing again

        await asyncio.wrap_future(self.call(forget))

    def wait_for_quiet(self, timeout: float | None = None) -> bool:
        """Block (any thread but the engine's) until no client request is being received,
        queued or run, so that background work (embedding documents) takes no cores from
        one; False if `timeout` seconds passed first."""
        return self._quiet.wait(timeout)

    @property
    def computing(self) -> bool:
        """Whether the engine has any task, a client's or background (a document's prefill):
        background work on other threads then leaves it the cores it uses. A racy read of the
        scheduler's lists, good for a hint."""
        return self._scheduler.has_work

    def background_tasks(self) -> BackgroundTasks:
        """Background work by kind: queued, running, ended (any thread: a snapshot)."""
        done = {**self._loop.background_done, "compaction": self._compactor.compactions}
        waiting = (*self._inbox.tasks(), *tuple(self._scheduler.waiting))
        return BackgroundTasks.of(waiting, self._scheduler.active, done, self._quiet.n_waiting)

    def cached_length(self, salt: str, tokens: list[int]) -> int:
        """Leading tokens of `tokens` some cache tier holds for `salt` (slots, host, disk).
        Engine thread only: ask inside `call`."""
        return self._reuse.cached_length(self.keyed(salt), tokens)

    def keyed(self, salt: str) -> str:
        """`salt` (a tenant's) with this model's identity in front: every cache key made from it
        (slots, host and disk tiers, the encoder cache, reply memory) is the model's, so models
        that share a disk tier never read each other's KV, and the same file under another name
        does (app/cache/state_file.py `model_identity`). Idempotent."""
        return salt if salt.startswith(self._identity) else self._identity + salt

    @property
    def blend_unsupported(self) -> str | None:
        """Why blend is off on this model (None: on): its KV cannot take chunks at any position,
        or its blended answers were not measured close enough to full prefill's."""
        return self._blend.unavailable

    def has_chunk_kv(self, salt: str, head: list[int], tokens: list[int]) -> bool:
        """Whether a cache tier holds this chunk's own KV after `head` (blend) for `salt`.
        Engine thread only: ask inside `call`."""
        return self._blend.chunks.has(self.keyed(salt), head, tokens)

    async def save_slot(self, id_slot: int, path: Path) -> SlotSaved:
        """A slot's KV, tokens and salt into `path` (app/engine/kv/slot_files.py)."""
        return await self._slot_files.save(id_slot, path)

    async def restore_slot(self, id_slot: int, path: Path) -> SlotRestored:
        return await self._slot_files.restore(id_slot, path)

    async def erase_slot(self, id_slot: int) -> int:
        """Clear a slot's KV; returns the tokens it held."""
        return await self._slot_files.erase(id_slot)
