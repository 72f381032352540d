"""Which slot a task takes, and which slot's KV holds the most of its prompt.

Pure functions of the slots and the task, used by `Scheduler` at admission (`choose_slot`) and by
`PrefixReuse` to find a donor slot to copy a prefix from (`best_source`, through
`Scheduler.best_source`). A busy slot is never chosen, but its KV may still be a source: its
cells are shared by copy while it generates.
"""

from __future__ import annotations

from app.engine.core.slot import Slot
from app.engine.task import Task


def choose_slot(slots: list[Slot], task: Task, similarity: float) -> Slot | None:
    """Explicit id_slot > the conversation's own slot > the idle slot with the longest usable
    prefix > least recently used. A busy slot is never taken.

    A conversation whose slot is busy or was given away prefers an idle slot that holds no
    other conversation, so it does not push one out needlessly (its prefix can be copied
    from any slot or restored from host memory); failing that, it takes the least recently
    used idle slot. `similarity`: the least share of the prompt a slot must hold to be chosen
    for it."""
    wanted = task.request.id_slot
    if wanted is not None:
        slot = slots[wanted]
        return slot if slot.idle else None
    idle = [s for s in slots if s.idle]
    if not idle:
        return None
    session = task.request.session
    if session is not None:
        own = next((s for s in idle if s.session == session), None)
        if own is not None:
            return own
        unpinned = [s for s in idle if s.session is None]
        if not unpinned:
            return min(idle, key=lambda s: s.last_used)
        idle = unpinned
    prompt = task.request.prompt
    if len(prompt) > 0:
        # Also without cache_prompt (the prompt is then computed anew): the slot that held it
        # last puts it in the same cells, and the same cells give the same floating-point
        # sums, so a repeated request at temperature 0 repeats its answer.
        best, best_lcp = None, 0
        salt, approximate = task.request.cache_salt, task.request.approximate
        for slot in idle:
            lcp = slot.reusable_prefix(prompt, salt, approximate)
            if lcp > best_lcp:
                best, best_lcp = slot, lcp
        if best is not None and best_lcp / len(prompt) >= similarity:
            return best
    # Nothing worth reusing: keep clear of the slots conversations will come back to.
    unpinned = [s for s in idle if s.session is None]
    return min(unpinned or idle, key=lambda s: s.last_used)


def best_source(
    slots: list[Slot], task: Task, exclude: Slot | None = None
) -> tuple[Slot | None, int]:
    """The slot (idle or busy) whose KV holds the longest prefix of the task's prompt."""
    best, best_n = None, 0
    for slot in slots:
        if slot is not exclude:
            request = task.request
            n = slot.reusable_prefix(request.prompt, request.cache_salt, request.approximate)
            if n > best_n:
                best, best_n = slot, n
    return best, best_n
