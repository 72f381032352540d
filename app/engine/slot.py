"""`Slot`: one KV sequence of the shared context and the exact tokens that KV holds.

Invariant: `cache` is exactly what KV sequence `id` holds, positions 0..cache.n_pos-1 (prompt and
generated tokens that were decoded; a sampled token that was never decoded is not in it). A slot
keeps its KV after its request ends, so a next request sharing a prefix prefills only the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mm.token_sequence import TokenSequence

if TYPE_CHECKING:
    from app.engine.model import Model
    from app.engine.task import Task


@dataclass(slots=True)
class SlotInfo:
    id: int
    state: str  # "idle" | "processing"
    n_cached: int
    task_id: int | None
    last_used: float


class Slot:
    def __init__(self, slot_id: int) -> None:
        self.id = slot_id
        self.cache = TokenSequence()
        self.task: Task | None = None
        self.last_used = 0.0  # time.monotonic() of the last release; 0 = never used
        # Tokens to prefill while idle (a conversation's predictable continuation); not in the
        # KV and not in `cache` until a step decodes them. Dropped when a request takes the slot.
        self.tail: list[int] | None = None
        self.tail_due = 0.0  # time.monotonic() after which the tail may be prefilled

    @property
    def idle(self) -> bool:
        return self.task is None

    def reusable_prefix(self, prompt: TokenSequence) -> int:
        """How much of `prompt` this slot's KV can serve (before the one-token rule)."""
        return self.cache.common_prefix(prompt)

    def prepare(self, prompt: TokenSequence, use_cache: bool, model: Model) -> int:
        """Cut the KV back to the longest reusable prefix of `prompt`; return its length.

        At least one prompt token is always left to evaluate so the request has logits: on an exact
        repeat the last token is evaluated again. A cut never falls inside a media chunk.
        """
        self.tail = None
        n = self.reusable_prefix(prompt) if use_cache else 0
        if n >= len(prompt):
            n = len(prompt) - 1
        inside = prompt.chunk_containing(n) if n > 0 else None
        if inside is not None:
            n = inside[0]
        if n < len(self.cache) and not model.seq_rm(self.id, self.cache.pos_at(n), -1):
            # Memory that cannot cut partially (e.g. recurrent state): start over.
            n = 0
        if n == 0:
            model.seq_clear(self.id)
        self.cache.keep_first(n)
        return n

    def erase(self, model: Model) -> None:
        self.tail = None
        model.seq_clear(self.id)
        self.cache = TokenSequence()

    def release(self) -> None:
        self.task = None
        self.last_used = time.monotonic()

    def info(self) -> SlotInfo:
        # Read by the event loop while the engine thread runs: take each field once.
        task = self.task
        return SlotInfo(
            self.id,
            "idle" if task is None else "processing",
            len(self.cache),
            task.id if task is not None else None,
            self.last_used,
        )
