"""`Engine`: one thread that owns the llama context and runs the scheduler loop.

The loop takes in submitted tasks, admits waiting ones to slots (prefix reuse, parking idle KV)
and runs one `Stepper` step (app/engine/stepper.py: plan, llama_decode, sample) at a time.

The HTTP event loop never calls llama.cpp: it submits a Task and awaits its events, which the
engine thread hands over with `loop.call_soon_threadsafe`. `llama_decode` is a ctypes call, which
releases the GIL, so the event loop keeps serving while a batch is computed.

Every graph (warm-up, decode, the projector's warm-up and image encodes) runs on the engine thread
for the life of the process: `start()` builds the vision projector and warms up there, and the
model then refuses compute from any other thread (see app/engine/model.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from app.cache.chunk_kv import ChunkKv, model_fingerprint
from app.cache.disk_cache import DiskCache
from app.cache.host_cache import HostCache
from app.engine.arrivals import Arrival, Arrivals
from app.engine.chunk_blend import ChunkBlend
from app.engine.config import EngineConfig
from app.engine.inbox import Inbox
from app.engine.kv_compactor import KvCompactor
from app.engine.model import Model
from app.engine.outbox import FIRST_EVENT_WAIT_S, Outbox
from app.engine.prefix_reuse import PrefixReuse
from app.engine.request import GenerationRequest
from app.engine.sampler import Sampler
from app.engine.scheduler import Scheduler
from app.engine.slot import Slot, SlotInfo
from app.engine.stepper import Stepper
from app.engine.stream import EngineStream
from app.engine.task import Sink, Task
from app.engine.vision import Vision

log = logging.getLogger(__name__)


class Engine:
    def __init__(self, config: EngineConfig, model: Model | None = None) -> None:
        self.config = config
        self.model = model or Model(config)
        self.scheduler = Scheduler(self.model.n_seq_max, config.slot_prompt_similarity)
        host = HostCache(config.cache_ram_bytes, config.cache_ram_tokens, config.cache_policy)
        disk = (
            DiskCache(config.cache_dir, config.model_path, config.cache_disk_bytes)
            if config.cache_dir
            else None
        )
        self._wake = threading.Event()
        self.arrivals = Arrivals(wake=self._wake.set)  # taken by the HTTP layer
        self.reuse = PrefixReuse(
            self.model, self.scheduler, host, disk, config.cache_reuse, wake=self._wake.set
        )
        chunks = ChunkKv(host, disk, model_fingerprint(config.model_path))
        self.blend = ChunkBlend(self.model, chunks, config.blend_sink_tokens)
        self.vision: Vision | None = None  # built on the engine thread by start()
        self.stepper = Stepper(self.model, self.scheduler, self.reuse, self.n_ctx_request)
        self.reuse.prefill_tail = self.stepper.prefill_tail
        self.compactor = KvCompactor(self.model, host.pool, config.defrag_thold)
        # Events of a step, one event-loop wake-up per step. Waiting for a loop to send first
        # tokens pays on CPU only, where the next decode takes the cores the loop needs.
        on_cpu = self.model.n_gpu_layers == 0
        self.outbox = Outbox(FIRST_EVENT_WAIT_S if on_cpu else 0.0)
        # Tasks and calls from other threads; closed = the engine is stopping.
        self.inbox = Inbox(self._wake.set)
        self.dead = False  # the engine thread died: nothing will be served any more
        self._last_busy = 0.0  # time.monotonic() when the last step with requests ended
        self._park_pending = False  # idle slots with KV to move to host memory after a step
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine thread; returns once it has claimed the model, built the projector
        and warmed up (raises what that raised, e.g. a bad projector file)."""
        ready: Future = Future()
        self._thread = threading.Thread(
            target=self._main, args=(ready,), name="engine", daemon=True
        )
        self._thread.start()
        ready.result()

    def _main(self, ready: Future) -> None:
        try:
            self.model.compute.claim()
            if self.config.mmproj_path:
                cfg = self.config
                self.vision = Vision(
                    self.model, cfg.mmproj_path, cfg.n_threads, cfg.encoder_cache_bytes
                )
                self.stepper.vision = self.vision
            if self.config.warmup:
                self.stepper.warmup()
        except BaseException as e:
            self.inbox.close()
            ready.set_exception(e)
            return
        ready.set_result(None)
        self._run()

    def stop(self, free: bool = True) -> None:
        """Stop the engine thread (queued and running requests fail with 503) and, unless
        free=False, free the model: the caller then frees it with `close()` once nothing that
        may still use the model (e.g. a response's end hooks) runs."""
        if self.reuse.disk is not None and self._thread is not None and self._thread.is_alive():
            try:  # keep the slots' KV across the restart
                self.call(self.reuse.persist).result(timeout=60)
            except Exception:
                log.exception("could not save the slots' KV at shutdown")
        self.inbox.close()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            if self._thread.is_alive():  # still inside llama_decode: freeing now would crash
                log.error("engine thread did not stop; leaving the model loaded")
                return
        if self.reuse.disk is not None:
            self.reuse.disk.flush()
        if free:
            self.close()

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return  # still inside llama_decode: freeing now would crash
        if self.vision is not None:
            self.vision.close()
        self.stepper.close()
        self.blend.close()
        self.model.close()

    # --- submission (any thread) ----------------------------------------------------------------

    @property
    def n_ctx_request(self) -> int:
        """KV cells one request may use, prompt and reply (llama-server's per-slot n_ctx)."""
        share = self.config.n_ctx_request or self.model.n_ctx // len(self.scheduler.slots)
        return max(1, min(share, self.model.n_ctx))

    def validate(self, request: GenerationRequest) -> None:
        """Check a request and apply the server's limits to it (-n: default and cap)."""
        cap = self.config.n_predict
        if cap > 0:
            request.max_tokens = min(request.max_tokens or cap, cap)
        request.check(
            self.n_ctx_request,
            self.model.n_vocab,
            len(self.scheduler.slots),
            self.vision is not None,
            self.model.n_ctx,
        )

    def submit(
        self, request: GenerationRequest, sink: Sink, arrival: Arrival | None = None
    ) -> Task:
        """Validate and queue; raises RequestError (nothing queued) on bad input. `arrival`: the
        request's ticket, settled as its task is queued (the engine never sees it pending with
        the task in the inbox, see `_gather`)."""
        self.validate(request)
        cache_prompt = (
            self.config.cache_prompt if request.cache_prompt is None else request.cache_prompt
        )
        task = Task(request, sink, cache_prompt)
        if self.config.request_timeout > 0 and not request.background:
            task.deadline = time.monotonic() + self.config.request_timeout
        check = None if request.background else self._check_queue_room
        self.inbox.put_task(task, check, arrival)
        return task

    def check_room(self) -> None:
        """Raise the 503 that `submit` would raise now (a caller about to store something)."""
        self.inbox.check(self._check_queue_room)

    def _check_queue_room(self, inbox: list[Task]) -> None:  # under the inbox's lock
        self.scheduler.check_queue_room(self.config.max_queue, inbox)

    def cancel(self, task: Task) -> None:
        task.cancelled = True
        self._wake.set()

    def open(
        self, request: GenerationRequest, streaming: bool = True, arrival: Arrival | None = None
    ) -> EngineStream:
        """Submit from the event loop; iterate the result for events. Raises RequestError.
        Not `streaming`: the text comes all at once with the end."""
        return EngineStream(self, request, streaming, arrival)

    def slots(self) -> list[SlotInfo]:
        return [slot.info() for slot in self.scheduler.slots]

    @property
    def n_waiting(self) -> int:
        return len(self.scheduler.waiting) + len(self.inbox)

    # --- the loop (engine thread only) ----------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self.inbox.closed:
                try:
                    was_idle = not self.scheduler.active
                    self._intake()
                    # What admission sent (an exact repeat's first token, failures) goes out
                    # now, not after the next decode.
                    self.outbox.flush()
                    if was_idle:
                        self._gather()
                    if self.scheduler.has_work:
                        self.stepper.step()
                        self.outbox.flush()
                        if self._park_pending:
                            self._park_pending = False
                            self.reuse.park_idle(save=True)
                        self.compactor.after_step(self.scheduler.slots)
                        self._last_busy = time.monotonic()
                        continue
                    # Idle prefill waits until the whole engine has been idle for the delay, so
                    # it does not hold up a request arriving right after another one ended.
                    due = self.scheduler.next_tail_due()
                    if due is not None:
                        due = max(due, self._last_busy + self.config.idle_prefill_delay)
                    now = time.monotonic()
                    if due is not None and due <= now:
                        self.stepper.step()
                        continue
                    self._wake.wait(timeout=1.0 if due is None else due - now)
                    self._wake.clear()
                except Exception:  # a bug in one step must not kill the server
                    log.exception("engine step failed; failing the active requests")
                    self.stepper.fail_active()
                    self.outbox.flush()
        except BaseException:
            log.exception("engine thread died")
            self.dead = True
            raise
        finally:
            self.inbox.close()
            pending, calls = self.inbox.take()
            for _, future in calls:
                future.set_exception(RuntimeError("the engine stopped"))
            for task in list(self.scheduler.active) + list(self.scheduler.waiting) + pending:
                task.fail("the server is shutting down", status=503, code="unavailable")
            self.outbox.flush()

    def call(self, fn: Callable[[], object]) -> Future:
        """Run fn on the engine thread between steps (for state only it may touch)."""
        return self.inbox.put_call(fn)

    def _intake(self) -> None:
        new, calls = self.inbox.take()
        for fn, future in calls:
            try:
                future.set_result(fn())
            except Exception as e:  # the caller gets it
                future.set_exception(e)
        for task in new:
            self.scheduler.enqueue(task)
            self.reuse.prefetch(task)
        for task in self.scheduler.past_deadline(time.monotonic()):
            limit = self.config.request_timeout
            task.fail(f"the request exceeded the time limit of {limit:g} s", 504, "timeout")
        for task in self.scheduler.take_cancelled():
            task.finish("cancelled")  # no-op if it already finished
        while (admission := self.scheduler.next_admission()) is not None:
            self._admit(*admission)

    def _gather(self) -> None:
        """An idle engine about to prefill first admits what was submitted meanwhile and waits
        (at most --burst-wait) while requests the HTTP layer has received are not yet
        submitted, as long as slots are free, so that a burst's prompts go into one batch
        (app/engine/arrivals.py). Nothing decodes meanwhile: no stream waits."""
        deadline = time.monotonic() + self.config.burst_wait
        sched = self.scheduler
        while (
            (self.inbox or self.arrivals.pending)
            and any(t.prefilling for t in sched.active)
            and any(s.idle for s in sched.slots)
        ):
            if not self.inbox:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._wake.wait(left)
                self._wake.clear()
            self._intake()
            self.outbox.flush()

    def _admit(self, task: Task, slot: Slot) -> None:
        prompt = task.request.prompt
        try:
            sampler = Sampler(
                task.request.sampling, self.model.n_vocab, self.model.n_ctx, self.model.vocab
            )
        except ValueError as e:  # a grammar llama.cpp could not parse: nothing changed yet
            task.fail(str(e), status=400, code="invalid_request_error")
            return
        park = self.config.park_idle_slots
        n_cached, source = self.reuse.prepare(task, slot, park)
        # What admission left (an idle donor, slots not saved before a short prefill) goes in
        # the pass after this step, once the first token is out.
        self._park_pending |= park
        sampler.accept_prompt(prompt.text_tokens(0, len(prompt)) if not prompt.has_media else [])
        slot.documents |= task.request.documents  # the KV now holds (or will hold) its chunks
        task.start(slot.id, n_cached, sampler, source)
        self.blend.apply(task, slot)  # a blend request's chunks, placed after that prefix
        self.scheduler.bind(task, slot)
        task.on_close = lambda: self._closed(task, slot)
        if not task.prefilling:  # an exact repeat of the slot's last prompt
            self.stepper.sample_repeat(task, slot)

    def _closed(self, task: Task, slot: Slot) -> None:
        """The task ended (its terminal event goes out right after this): queue the idle
        prefill of its conversation's next-turn boundary, then free the slot."""
        tail = task.next_turn_tail(self.model.is_eog)
        delay = self.config.idle_prefill_delay
        if tail and delay >= 0 and slot.cache.n_pos + len(tail) < self.model.n_ctx:
            slot.tail, slot.tail_due = tail, time.monotonic() + delay
        self.scheduler.release(task)
