"""`Slot`: one KV sequence of the shared context and the exact tokens that KV holds.

Invariant: `cache` is exactly what KV sequence `id` holds, positions 0..cache.n_pos-1 (prompt and
generated tokens that were decoded; a sampled token that was never decoded is not in it). A slot
keeps its KV after its request ends, so a next request sharing a prefix prefills only the rest.

It also keeps the logits its last prompt ended on: an exact repeat of that prompt (a retry, a
regenerated reply) then samples its first token from them and evaluates nothing, where
llama.cpp would need its last token decoded again. Invariant: those logits are what the model
gives after the first `_logits_n` tokens of `cache`; whatever rewrites that part of the KV drops
them (appending does not).

Blended KV (app/engine/blend/chunk_blend.py) is approximate: from `blended_from` on, the KV holds
chunks computed apart and moved into place. Invariant: a request that wants exact reuse is never
served a prefix past `blended_from`, and neither is a cache tier (`PrefixReuse.save`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mm.token_sequence import TokenSequence

if TYPE_CHECKING:
    from app.engine.llama.model import Model
    from app.engine.task import Task


def usable_prefix(prompt: TokenSequence, n: int) -> int:
    """The most of a matched prefix of length n a request may take from the KV.

    At least one prompt token is always evaluated so the request has logits (an exact repeat
    evaluates its last token again), and a cut never falls inside a media chunk.
    """
    n = min(n, len(prompt) - 1)
    inside = prompt.chunk_containing(n) if n > 0 else None
    return inside[0] if inside is not None else max(n, 0)


@dataclass(slots=True)
class SlotInfo:
    id: int
    state: str  # "idle" | "processing"
    n_cached: int
    task_id: int | None
    session: str | None
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
        self.salt = ""  # tenant whose tokens `cache` holds
        self.session: str | None = None  # conversation whose KV this slot holds (affinity)
        # Documents whose chunks may be in the KV (a superset: cleared only when the KV is).
        self.documents: frozenset[str] = frozenset()
        self._logits: np.ndarray | None = None  # see the module's second invariant
        self._logits_n = 0
        self.blended_from: int | None = None  # first approximate token of `cache`; None: exact
        # What the KV held when it was parked (salt, tokens): a slot save brings it back from
        # host memory (`PrefixReuse.unpark`). Only read while `cache` is empty.
        self.parked: tuple[str, TokenSequence] | None = None

    @property
    def idle(self) -> bool:
        return self.task is None

    def reusable_prefix(self, prompt: TokenSequence, salt: str, approximate: bool = False) -> int:
        """How much of `prompt` this slot's KV can serve (before the one-token rule); blended
        KV only to a request that takes `approximate` KV (a blend request).

        KV cached under another tenant's salt serves nothing: no cross-tenant timing signal.
        """
        n = self.cache.common_prefix(prompt) if salt == self.salt else 0
        if not approximate and self.blended_from is not None:
            n = min(n, self.blended_from)
        return n

    def keep_logits(self, logits: np.ndarray) -> None:
        """The logits of the last prompt token, just decoded: `cache` ends with that prompt."""
        self._logits, self._logits_n = logits.copy(), len(self.cache)

    def repeat_logits(self, prompt: TokenSequence, salt: str) -> np.ndarray | None:
        """The kept logits if `prompt` is exactly the prompt they ended (the KV holds all of it,
        under the same tenant), else None."""
        if self._logits is None or self._logits_n != len(prompt):
            return None
        return self._logits if self.reusable_prefix(prompt, salt) >= len(prompt) else None

    def _drop_logits_past(self, n: int) -> None:
        if n < self._logits_n:
            self._logits, self._logits_n = None, 0

    def cut_to(self, n: int, model: Model) -> int:
        """Keep the first n tokens of the KV (n from `usable_prefix`, or the whole prompt for a
        repeat with kept logits); return what is kept."""
        self.tail = None
        if n > 0 and not model.can_keep(self.id, self.cache.pos_at(n)):
            n = 0  # a sliding window that no longer holds what position n needs: start over
        if n < len(self.cache) and not model.seq_rm(self.id, self.cache.pos_at(n), -1):
            n = 0  # memory that cannot cut partially (e.g. recurrent state): start over
        if n == 0:
            model.seq_clear(self.id)
            self.documents = frozenset()
        if self.blended_from is not None and n <= self.blended_from:
            self.blended_from = None
        self._drop_logits_past(n)
        self.cache.keep_first(n)
        return n

    def shift_reuse(self, prompt: TokenSequence, n: int, min_chunk: int, model: Model) -> int:
        """llama.cpp's cache_reuse: after the common prefix n, runs of at least `min_chunk`
        tokens that the KV holds further on are shifted into place instead of recomputed.

        Text only (a shifted image chunk is not the same image in context). The KV past the
        returned length is left for `cut_to`. Returns the new reusable length (< len(prompt)).
        """
        if min_chunk <= 0 or self.cache.has_media or prompt.has_media or not model.can_shift:
            return n
        if self.blended_from is not None:  # the runs it would move may be approximate
            return n
        cache = list(self.cache.tokens)
        wanted = prompt.text_tokens(0, len(prompt))
        limit = len(wanted) - 1  # the last prompt token is always evaluated
        head_c = head_p = n
        while head_c < len(cache) and head_p < limit:
            run = 0
            while (
                head_c + run < len(cache)
                and head_p + run < limit
                and cache[head_c + run] == wanted[head_p + run]
            ):
                run += 1
            if run >= min_chunk:
                if head_c > head_p:  # drop the gap, then move the run back to head_p
                    model.seq_rm(self.id, head_p, head_c)
                    model.seq_shift(self.id, head_c, head_c + run, head_p - head_c)
                cache[head_p : head_p + run] = cache[head_c : head_c + run]
                head_c += run
                head_p += run
            else:
                head_c += 1
        if head_p > n:
            # The KV now holds the prompt's first head_p tokens, then whatever was not reused.
            self._drop_logits_past(n)
            model.seq_rm(self.id, head_p, -1)
            self.cache = TokenSequence(cache[:head_p])
        return head_p

    def copy_prefix(self, donor: Slot, n: int, model: Model) -> None:
        """Replace this slot's KV with the first n tokens of donor's (shared cells, no compute).

        The donor may be generating: its cells below n are never written again by it."""
        self.tail = None
        self._drop_logits_past(0)
        model.seq_clear(self.id)
        model.seq_cp(donor.id, self.id, 0, donor.cache.pos_at(n))
        self.cache = donor.cache.copy()
        self.cache.keep_first(n)
        self.salt = donor.salt
        self.documents = donor.documents
        blended = donor.blended_from
        self.blended_from = blended if blended is not None and blended < n else None

    def erase(self, model: Model) -> None:
        self.tail = None
        self.parked = None
        self.salt = ""
        self.session = None
        self.documents = frozenset()
        self.blended_from = None
        self._drop_logits_past(0)
        model.seq_clear(self.id)
        self.cache = TokenSequence()

    def park(self, model: Model) -> None:
        """Drop the KV (saved elsewhere) but keep the conversation's claim on this slot: it
        comes back here and restores its prefix from host memory."""
        session, parked = self.session, (self.salt, self.cache)
        self.erase(model)
        self.session, self.parked = session, parked

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
            self.session,
            self.last_used,
        )
