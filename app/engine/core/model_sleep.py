"""`ModelSleep`: an idle engine frees its model and loads it again when work comes, keeping what
it computed (llama-server's `--sleep-idle-seconds`; a router's unload is the same sleep).

Falling asleep (engine thread, nothing running or queued): every slot's KV is saved to the host
tier (the disk tier behind it, where there is one), within `--cache-ram` and `--cache-disk`, the
slots are parked, and the projector, the context and the weights are freed. The vocabulary stays
(app/engine/llama/model.py): tokenizing and the read-only routes (`/health`, `/props`, `/models`,
`/metrics`, `/slots`) answer without waking it. Waking (engine thread, before the work that
woke it runs): the same weights and context again, the projector, the warm-up. A conversation's
next turn then restores its prefix from the host or disk tier, as after any change of slot.

Thread-safety: `touch` and the read-only state may be used from any thread; the rest is the
engine thread's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from app.engine.blend.chunk_blend import ChunkBlend
from app.engine.core.scheduler import Scheduler
from app.engine.core.stepper import Stepper
from app.engine.kv.prefix_reuse import PrefixReuse
from app.engine.llama.model import Model
from app.engine.llama.vision import Vision

log = logging.getLogger(__name__)


class ModelSleep:
    def __init__(
        self,
        idle_seconds: float,
        model: Model,
        scheduler: Scheduler,
        reuse: PrefixReuse,
        blend: ChunkBlend,
        vision: Vision | None,
        stepper: Stepper,
        warmup: bool,
        wake: Callable[[], None],
    ) -> None:
        self.idle_seconds = idle_seconds  # <= 0: never falls asleep by itself
        self.model, self.scheduler, self.reuse = model, scheduler, reuse
        self.blend, self.vision, self.stepper = blend, vision, stepper
        self.warmup = warmup
        self._wake = wake  # wakes the engine loop
        self.asleep = False
        self.waking = False  # asked to wake: the engine thread loads before anything else
        self.last_active = time.monotonic()
        self.sleeps = 0  # times it fell asleep (or was unloaded)
        self.load_seconds = 0.0  # the last wake's load, projector and warm-up

    @property
    def sleeping(self) -> bool:
        """Asleep and not asked to wake (`/props` `is_sleeping`; any thread)."""
        return self.asleep and not self.waking

    def touch(self) -> None:
        """Work is coming (any thread): the idle time starts again, and a sleeping model starts
        loading now, while the request is still being read."""
        self.last_active = time.monotonic()
        if self.asleep and not self.waking:
            self.waking = True
            self._wake()

    def seconds_left(self, now: float) -> float | None:
        """Until the idle engine falls asleep (None: it never does, or it is asleep)."""
        if self.idle_seconds <= 0 or self.asleep:
            return None
        return self.last_active + self.idle_seconds - now

    def fall_asleep(self) -> None:
        """Save every slot's KV, free the model (engine thread, nothing running)."""
        if self.asleep:
            return
        t0 = time.perf_counter()
        self.reuse.persist()  # within --cache-ram; the disk tier keeps what host memory drops
        held = sum(len(slot.cache) for slot in self.scheduler.slots)
        for slot in self.scheduler.slots:
            if len(slot.cache):
                slot.park(self.model)  # the conversation comes back here and restores it
            slot.tail = None
        self.blend.clear_scratch()
        if self.vision is not None:
            self.vision.close()
        self.model.unload()
        self.asleep, self.waking = True, False
        self.sleeps += 1
        log.info(
            "model asleep: %d slot tokens saved to the cache tiers, weights freed (%.0f ms)",
            held,
            1000 * (time.perf_counter() - t0),
        )

    def wake_up(self) -> None:
        """Load the model again (engine thread); the idle time starts again."""
        if not self.asleep:
            return
        t0 = time.perf_counter()
        self.model.load()
        if self.vision is not None:
            self.vision.open()
        if self.warmup:
            self.stepper.warmup()
        self.asleep, self.waking = False, False
        self.last_active = time.monotonic()
        self.load_seconds = time.perf_counter() - t0
        log.info("model awake (loaded in %.0f ms)", 1000 * self.load_seconds)
