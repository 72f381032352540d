"""`BackgroundTasks`: the background work the engine holds now and has done, by kind.

Background work computes KV nobody waits for yet: a ready document's prefix (`prefill`) and, in a
collection that blends, each chunk's own KV (`chunk_kv`), both background requests that run only
while no client request is received, queued or run (app/engine/core/scheduler.py), and packing the
KV cells in use (`compaction`, app/engine/kv/kv_compactor.py), which runs between steps. `/metrics`
shows what is queued and running and counts what ended, so a client can see that work and when
it ends. Task counts are read from other threads without the engine's lock: a snapshot, good for
a gauge.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from app.engine.request import GenerationRequest
from app.engine.task import Task

TASK_KINDS = ("prefill", "chunk_kv")  # background requests
KINDS = (*TASK_KINDS, "compaction")  # what the completed counts cover


def kind_of(request: GenerationRequest) -> str | None:
    """A background request's kind; None for a client's."""
    if not request.background:
        return None
    return "chunk_kv" if request.keep_chunk is not None else "prefill"


def by_kind(requests: Iterable[GenerationRequest]) -> dict[str, int]:
    """How many of these are background requests of each kind (every kind, 0 included)."""
    counts = dict.fromkeys(TASK_KINDS, 0)
    for request in requests:
        kind = kind_of(request)
        if kind is not None:
            counts[kind] += 1
    return counts


@dataclass(slots=True)
class BackgroundTasks:
    """Background tasks by kind: waiting (submitted, or sent back to the queue by a client),
    holding a slot, and ended since start-up (compactions included); and the background
    workers off the engine thread (embedding documents) waiting while clients are served."""

    queued: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TASK_KINDS, 0))
    running: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TASK_KINDS, 0))
    completed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    yielding: int = 0

    @classmethod
    def of(
        cls, waiting: Iterable[Task], active: list[Task], completed: dict[str, int], yielding: int
    ) -> BackgroundTasks:
        """The counts of these tasks (waiting, holding a slot) with what ended; `active` is the
        scheduler's list, copied at once (another thread may change it meanwhile)."""
        running = by_kind(t.request for t in tuple(active))
        return cls(by_kind(t.request for t in waiting), running, completed, yielding)
