"""`KvCompactor`: packs the KV cells in use at the bottom of the cache when cuts have left holes
under cells still in use.

llama.cpp's attention spans every KV cell up to the highest one in use (its n_kv, padded to 256
cells), whichever sequence holds it and however many cells below are free. Cutting a slot back to
a short prefix, parking idle slots and erasing leave holes; a kept prefix above them (placed there
while the cells below were busy) keeps the span long, and every decode of every slot attends over
the holes: a short prefix left high up costs every step as much as a cache filled up to it.
llama.cpp has deprecated its own defragmentation (`defrag_thold` is ignored), and llama-server
leaves the holes, also after bench.compare's long-prompt scenarios (figures: docs/kv-reuse.md,
Measurements).

A compaction is a whole-memory state round trip (llama_state_seq_get/set_data with seq -1): the
write lists the cells in use in order, each with every sequence it belongs to, and the read
clears the cache and puts them back at cells 0..n-1. Cells shared by several sequences
(llama_memory_seq_cp) stay shared, every sequence keeps its positions and values, and the next
decode's logits are those of a cache that was never fragmented, bit for bit (tests). Cost: the
read zero-fills the whole cache first, and the copies grow with the cells in use (figures:
docs/kv-reuse.md, Measurements). The zero-fill grows with the context, not with what is in
use, so the holes must also be at least 1/16 of the context: where they were under kept cells,
each step then reads at least 1/16 of the cache's bytes fewer, and ~16 steps pay for writing
all of them once.

The API does not say where cells are, so the compactor bounds the holes: the slots held at most
`peak` tokens since the last compaction and hold `live` now, so at most `peak - live` freed cells
can lie under kept ones. It compacts when that bound is at least `min_holes` cells (MIN_HOLES,
or 1/16 of the context if more) and more than `threshold` of `peak` (llama-server's
--defrag-thold; < 0: never). Engine thread only; the engine asks after each step, once that
step's tokens are sent: a compaction delays next tokens, and a first token only where a long
prompt is still being prefilled in parts.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.cache.state_pool import StatePool
from app.engine.core.slot import Slot
from app.engine.llama.model import Model

# Fewer freed cells than two of llama.cpp's 256-cell pads cannot shorten the span by much.
MIN_HOLES = 512
ALL_SEQUENCES = -1  # llama_state_seq_* with seq -1: the whole memory, shared cells and all


class KvCompactor:
    def __init__(
        self,
        model: Model,
        pool: StatePool,
        threshold: float = 0.1,
        on_op: Callable[[str, str, float], None] | None = None,
    ) -> None:
        self.model = model
        self.pool = pool  # the host tier's buffers: no fresh pages once it is warm
        self.threshold = threshold
        self.min_holes = max(MIN_HOLES, model.n_ctx // 16)
        self.peak = 0  # most tokens the slots held since the last compaction (a bound)
        self.compactions = 0
        # (op, tier, seconds) of each compaction: the /metrics histogram of KV moves.
        self.on_op = on_op

    def after_step(self, slots: list[Slot]) -> None:
        """Compact if due. Raises what `compact` raised, with the idle slots erased (the KV may
        be empty): the engine fails the running requests and erases their slots."""
        live = sum(len(slot.cache) for slot in slots)
        if not self.due(live):
            return
        try:
            self.compact(live)
        except RuntimeError:
            for slot in slots:
                if slot.idle:
                    slot.erase(self.model)
            raise

    def due(self, live: int) -> bool:
        """Whether the KV should be compacted now that the slots hold `live` tokens (their
        cache lengths summed; cells shared by slots count once per slot)."""
        if live == 0:  # nothing in use, nothing to span: the holes are gone
            self.peak = 0
            return False
        self.peak = max(self.peak, live)
        holes = self.peak - live
        if self.threshold < 0 or holes < self.min_holes:
            return False
        return holes > self.threshold * self.peak

    def compact(self, live: int) -> None:
        """Pack the cells in use at cells 0..n-1. Raises RuntimeError if the state could not be
        written or read back; a failed read leaves the KV empty (the caller erases the slots)."""
        t0 = time.perf_counter()
        model = self.model
        blob = model.state_blob(ALL_SEQUENCES, self.pool)
        try:
            if blob.n_bytes == 0:
                raise RuntimeError("could not write the KV state for compaction")
            if not model.state_restore(ALL_SEQUENCES, blob.view()):
                raise RuntimeError("could not read the KV state back after compaction")
        finally:
            blob.release()
        self.peak = live
        self.compactions += 1
        if self.on_op is not None:
            self.on_op("compact", "kv", time.perf_counter() - t0)
