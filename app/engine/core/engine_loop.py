"""`EngineLoop`: the engine thread's loop over the parts `Engine` built.

Each turn takes in submitted tasks and calls, admits waiting tasks to slots (prefix reuse,
parking idle KV), runs one `Stepper` step (plan, llama_decode, sample) and hands the step's
events to the event loops; an idle engine prefills pending conversation tails once it has been
idle for the delay, and otherwise sleeps until woken.

Engine thread only.
"""

from __future__ import annotations

import logging
import threading
import time

from app.engine.background_tasks import TASK_KINDS, kind_of
from app.engine.blend.chunk_blend import ChunkBlend
from app.engine.core.arrivals import Arrivals
from app.engine.core.inbox import Call, Inbox
from app.engine.core.model_sleep import ModelSleep
from app.engine.core.outbox import Outbox
from app.engine.core.quiet_gate import QuietGate
from app.engine.core.scheduler import Scheduler
from app.engine.core.slot import Slot
from app.engine.core.stepper import Stepper
from app.engine.engine_config import EngineConfig
from app.engine.kv.kv_compactor import KvCompactor
from app.engine.kv.prefix_reuse import PrefixReuse
from app.engine.llama.model import Model
from app.engine.sampler import Sampler
from app.engine.task import Task

log = logging.getLogger(__name__)


class EngineLoop:
    def __init__(
        self,
        config: EngineConfig,
        model: Model,
        scheduler: Scheduler,
        reuse: PrefixReuse,
        stepper: Stepper,
        compactor: KvCompactor,
        inbox: Inbox,
        outbox: Outbox,
        arrivals: Arrivals,
        wake: threading.Event,
        quiet: QuietGate,
        blend: ChunkBlend,
        sleep: ModelSleep,
    ) -> None:
        self.config, self.model, self.scheduler = config, model, scheduler
        self.reuse, self.stepper, self.compactor = reuse, stepper, compactor
        self.inbox, self.outbox, self.arrivals = inbox, outbox, arrivals
        self._wake = wake  # set by whatever gives the loop work
        self.quiet = quiet  # open while no client work is found (background workers wait)
        self.blend = blend  # places a blend request's chunks after its prefix
        self.sleep = sleep  # frees the model when idle, loads it again for work
        self.dead = False  # the loop died: nothing will be served any more
        self._last_busy = 0.0  # time.monotonic() when the last step with requests ended
        self._park_pending = False  # idle slots with KV to move to host memory after a step
        # Background tasks ended, by kind (read from other threads: /metrics).
        self.background_done = dict.fromkeys(TASK_KINDS, 0)

    def run(self) -> None:
        try:
            while not self.inbox.closed:
                try:
                    was_idle = not self.scheduler.active
                    self._intake()
                    # What admission sent (an exact repeat's first token, failures) goes out
                    # now, not after the next decode; tokens at the stream interval.
                    self.outbox.flush_due()
                    if was_idle:
                        self._gather()
                    clients = self._clients_present()
                    self.quiet.set(not clients)
                    if self.scheduler.has_work:
                        if any(t.prefilling for t in self.scheduler.active):
                            self.outbox.flush()  # a step that prefills may take long
                        if not self.stepper.step(background=not clients):
                            # Only background work, held back while a request is received,
                            # or a prefix still being read from disk: wait for either.
                            self.outbox.flush()
                            self._wake.wait(timeout=0.05)
                            self._wake.clear()
                            continue
                        self.outbox.flush_due()
                        self.sleep.last_active = time.monotonic()
                        if (
                            self.inbox
                            or self.arrivals.pending
                            or (not clients and self.scheduler.busy_with_clients)
                        ):
                            # Requests came during the step (or a client during a background
                            # one): admit them first. Parking and compaction (tens of ms of saves
                            # and moves) wait for a step with none waiting, as they wait for an
                            # arriving client's first token.
                            continue
                        if self._park_pending:
                            self._park_pending = False
                            self.reuse.park_idle(save=True)
                        self.compactor.after_step(self.scheduler.slots)
                        if clients:
                            self._last_busy = time.monotonic()
                        continue
                    # No task: nothing pending waits through an idle step or the sleep.
                    self.outbox.flush()
                    # Idle prefill waits until the whole engine has been idle for the delay, so
                    # it does not hold up a request arriving right after another one ended.
                    due = self.scheduler.next_tail_due()
                    if due is not None:
                        due = max(due, self._last_busy + self.config.idle_prefill_delay)
                    now = time.monotonic()
                    if due is not None and due <= now and not clients:
                        self.stepper.step(background=True)
                        continue
                    if not clients and not self.sleep.asleep and self.reuse.warm_for_parking():
                        continue  # a piece at a time: a request arriving waits for one at most
                    asleep_in = self.sleep.seconds_left(now)
                    if asleep_in is not None and asleep_in <= 0 and due is None and not clients:
                        self.sleep.fall_asleep()
                        continue
                    self._wake.wait(timeout=_idle_wait(due, asleep_in, now))
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
            for call in calls:
                call.future.set_exception(RuntimeError("the engine stopped"))
            for task in list(self.scheduler.active) + list(self.scheduler.waiting) + pending:
                task.fail("the server is shutting down", status=503, code="unavailable")
            self.outbox.flush()

    def _intake(self) -> None:
        new, calls = self.inbox.take()
        if new or calls:
            self.sleep.last_active = time.monotonic()
        wakes = self.sleep.waking or new or any(c.needs_model for c in calls)
        if self.sleep.asleep and wakes and not self._wake_up(new, calls):
            return
        # Tasks queue before the calls run: a call that puts the model to sleep when idle
        # (Engine.sleep) sees the work that came with it.
        for task in new:
            self.scheduler.enqueue(task)
            self.reuse.prefetch(task)
        for call in calls:
            try:
                call.future.set_result(call.fn())
            except Exception as e:  # the caller gets it
                call.future.set_exception(e)
        if self.sleep.asleep and self.scheduler.has_work and not self._wake_up([], []):
            for task in self.scheduler.waiting:  # nothing can run them: the load failed
                task.fail("the model could not be loaded", status=503, code="unavailable")
            return
        for task in self.scheduler.past_deadline(time.monotonic()):
            limit = self.config.request_timeout
            task.fail(f"the request exceeded the time limit of {limit:g} s", 504, "timeout")
        for task in self.scheduler.take_cancelled():
            task.finish("cancelled")  # no-op if it already finished
        arriving = bool(self.arrivals.pending)
        while (admission := self.scheduler.next_admission(arriving)) is not None:
            self.outbox.flush()  # an admission may restore or place KV for a while
            task, slot = admission
            try:
                self._admit(task, slot)
            except Exception:  # a bug while admitting fails this request, not the others
                log.exception("admitting a request failed")
                slot.erase(self.model)  # its KV may be half restored or placed
                self.scheduler.release(task)
                task.fail("internal error while starting the request")

    def _wake_up(self, new: list[Task], calls: list[Call]) -> bool:
        """Load the sleeping model; if that fails, what woke it fails with the reason (the
        next work tries again)."""
        try:
            self.sleep.wake_up()
            return True
        except Exception as e:
            log.exception("loading the model failed")
            self.sleep.waking = False
            for call in calls:
                call.future.set_exception(e)
            for task in new:
                task.fail(f"the model could not be loaded: {e}", status=503, code="unavailable")
            return False

    def _clients_present(self) -> bool:
        """A client request is being received, waits in the inbox or the queue, or runs:
        background work must not start a batch now."""
        return bool(self.scheduler.busy_with_clients or self.arrivals.pending or self.inbox)

    def _gather(self) -> None:
        """An idle engine about to prefill first admits what was submitted meanwhile and waits
        (at most --burst-wait) while requests the HTTP layer has received are not yet
        submitted, as long as slots are free, so that a burst's prompts go into one batch
        (app/engine/core/arrivals.py). Nothing decodes meanwhile: no stream waits."""
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
        match = self.reuse.prepare(task, slot, park)
        # What admission left (an idle donor, slots not saved before a short prefill) goes in
        # the pass after this step, once the first token is out.
        self._park_pending |= park
        sampler.accept_prompt(prompt.text_tokens(0, len(prompt)) if not prompt.has_media else [])
        slot.documents |= task.request.documents  # the KV now holds (or will hold) its chunks
        task.start(slot.id, match, sampler)
        self.blend.apply(task, slot)  # a blend request's chunks, placed after that prefix
        self.scheduler.bind(task, slot)
        task.on_close = lambda: self._closed(task, slot)
        if not task.prefilling:  # an exact repeat of the slot's last prompt
            self.stepper.sample_repeat(task, slot)

    def _closed(self, task: Task, slot: Slot) -> None:
        """The task ended (its terminal event goes out right after this): queue the idle
        prefill of its conversation's next-turn boundary, publish its KV to a shared disk tier,
        then free the slot."""
        if task.request.keep_chunk is not None:
            try:
                self.blend.keep(task, slot)  # a chunk's own KV, computed in the background
            except Exception:  # not kept; the task still ends and its slot is freed
                log.exception("keeping a chunk's KV failed")
                slot.erase(self.model)
        tail = task.next_turn_tail(self.model.is_eog)
        delay = self.config.idle_prefill_delay
        if tail and delay >= 0 and slot.cache.n_pos + len(tail) < self.model.n_ctx:
            slot.tail, slot.tail_due = tail, time.monotonic() + delay
        self.reuse.publish(slot)
        self.scheduler.release(task)
        kind = kind_of(task.request)
        if kind is not None:
            self.background_done[kind] += 1


def _idle_wait(due: float | None, asleep_in: float | None, now: float) -> float:
    """Seconds an idle loop waits for work: until a conversation's tail is due or the model
    falls asleep, at most a second."""
    waits = [1.0]
    if due is not None:
        waits.append(due - now)
    if asleep_in is not None:
        waits.append(asleep_in)
    return max(0.0, min(waits))
