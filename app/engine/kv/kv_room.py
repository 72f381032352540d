"""`make_room`: what the engine gives up when the KV cache is full (llama_decode returned 1).

Speculative work goes first (idle prefill of turn boundaries), then idle slots' KV, least
recently used first and saved to host memory before it goes; only then a running request.
"""

from __future__ import annotations

import logging

from app.engine.core.scheduler import Planned, Scheduler
from app.engine.kv.prefix_reuse import PrefixReuse
from app.engine.llama.model import Model

log = logging.getLogger(__name__)

# llama-server's words (its tests look for them), then why.
FULL = "Context size has been exceeded: too many long requests at once for the shared KV cache"


def make_room(
    scheduler: Scheduler, reuse: PrefixReuse, model: Model, planned: list[Planned]
) -> bool:
    """The KV is full. Drop pending idle prefills; then free idle slots' KV (least recently
    used first); failing that, stop the task holding the most KV. Returns True when something
    changed, so the step can be re-planned."""
    tails = [s for s in scheduler.slots if s.tail]
    if tails:  # speculative work goes first
        for slot in tails:
            slot.tail = None
        return True
    busy = {p.slot.id for p in planned}
    idle = sorted(
        (s for s in scheduler.slots if s.idle and len(s.cache) > 0 and s.id not in busy),
        key=lambda s: s.last_used,
    )
    if idle:
        log.info("KV full: erasing idle slot %d", idle[0].id)
        reuse.save(idle[0], keep=0)
        idle[0].erase(model)
        return True
    if scheduler.active:
        # Stop whoever holds the most KV: it frees the most room and is the likeliest to be
        # the one that filled the context.
        task = max(scheduler.active, key=lambda t: len(scheduler.slot_of(t).cache))
        log.warning("KV full: stopping task %d", task.id)
        if task.prefilling:
            scheduler.slot_of(task).erase(model)
            task.fail(FULL + "; retry later", status=503, code="unavailable")
        else:
            # llama-server's error, not "length": the reply was cut by other requests' room in
            # the shared KV, not by its own limit, and a client may retry it.
            task.fail(FULL, status=500, code="server_error")
        scheduler.release(task)
        return True
    return False
