"""`ChunkBlend`: a blend request's chunks placed into its slot from their own KV (EPIC-style).

At admission, after prefix reuse put the longest exact prefix into the slot, each chunk of the
request's `BlendPlan` that lies after it is placed in prompt order:
1. its KV (head + chunk, computed once on its own after the collection's head) is restored into
   the scratch sequence from the host or disk tier, or computed there and kept (app/cache/
   chunk_kv.py);
2. its cells from the (k+1)-th token on are shifted to the chunk's position and shared into
   the slot (llama_memory_seq_cp over that range), leaving a gap before them: the prompt tokens
   since the previous chunk (a source's header) and the chunk's first k tokens. A state from a
   tier is shifted on the host before its restore where the model allows (app/engine/
   state_shift.py); otherwise, and for a chunk computed just now, in llama.cpp
   (llama_memory_seq_add);
3. once all are placed, each gap is decoded in order (the attention-sink repair: those tokens
   are computed seeing the real prefix, not the head alone). llama.cpp takes a sequence's batch
   only at positions after those it holds, so a gap is decoded in the scratch sequence, which
   first shares the slot's cells before it, then shared into the slot: one small decode per
   placed chunk. Cells moved in llama.cpp are re-roped at the first of them, in one K-shift, a
   pass over the whole cache that a decode after each placement would pay once per chunk.
   (Decoding the gaps side by side, each in a scratch sequence of its own, saves decodes but
   each gap then sees the chunks before it unrepaired: measured worse, docs/blend.md.)
What follows the last placed chunk (the question) is left to the scheduler, as any prompt.

Where blend is off on this model, the request keeps its prefix reuse and the task says why
(`timings.kv_reuse_reason`): its memory cannot shift (recurrent state, a sliding-window cache
without --swa-full), or its blended answers were not measured close enough to full prefill's
(app/engine/blend/blend_gate.py, unless --blend-force). A blended reply carries the agreement
measured at its k (`timings.kv_reuse_agreement`).
Engine thread only; like prefix reuse it runs between steps, so streams wait for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from app.cache.chunk_kv import ChunkKv
from app.engine.blend.blend_gate import BlendGate
from app.engine.blend_plan import ChunkSpan
from app.engine.core.slot import Slot
from app.engine.kv.state_shift import StateShift
from app.engine.llama.model import Model
from app.engine.reuse_kinds import KvReuse
from app.engine.task import Task


class ChunkBlend:
    def __init__(self, model: Model, chunks: ChunkKv, gate: BlendGate, forgotten: set[str]) -> None:
        self.model = model
        self.chunks = chunks
        # Deleted documents (PrefixReuse's set): their chunks' KV, computed by a task that
        # was already queued or running, is never kept.
        self.forgotten = forgotten
        self.gate = gate
        self.sink_tokens = gate.k  # k: tokens recomputed at the start of each placed chunk
        # Why blend is off on this model (None: on): its memory cannot take a chunk at another
        # position, else its quality gate.
        self.unavailable = model.blend_unsupported() or gate.refused
        self.scratch = model.scratch_seq
        self.shifter = StateShift(model)
        self._batch = model.new_batch()
        self._head_in_scratch = False  # the scratch sequence holds the head at 0..len(head)-1
        self.stats = BlendStats()

    def close(self) -> None:
        self._batch.close()

    def unsupported(self, task: Task) -> str | None:
        if task.request.prompt.has_media:
            return "the prompt holds images"
        if not task.cache_prompt:
            return "cache_prompt is off"
        return self.unavailable

    def apply(self, task: Task, slot: Slot) -> None:
        """Place the task's chunks after what its slot holds (`task.n_done` tokens); moves the
        task's progress past the last placed chunk."""
        plan = task.request.blend
        if plan is None:
            return
        reason = self.unsupported(task)
        if reason is not None:
            task.kv_reuse, task.kv_reuse_reason = KvReuse.PREFIX, reason
            return
        task.kv_reuse = KvReuse.BLEND
        task.kv_reuse_agreement = self.gate.agreement
        prompt = task.request.prompt
        tokens = prompt.text_tokens(0, len(prompt))
        k = self.sink_tokens
        last = len(prompt) - 1  # the last prompt token is the step's: it gives the logits
        cur = task.n_done
        # Blended KV a blend request took as its prefix counts as chunk KV too.
        reused = cur - slot.blended_from if slot.blended_from is not None else 0
        pieces: list[_Piece] = []
        self.shifter.check()
        try:
            end = cur  # where the placed run ends
            for whole in plan.spans:
                span = whole.after(end)  # the prefix may hold its first tokens
                if span.end > last or span.length <= k:
                    continue  # held by the prefix already, or not worth placing
                loaded = self.load_chunk(task.request.cache_salt, plan.head, span)
                if loaded.where is Loaded.NO_ROOM:
                    continue  # it is computed in the next gap
                if loaded.where is Loaded.AT_PLACE:
                    self.model.seq_cp(self.scratch, slot.id, span.start + k, span.end)
                    self._clear_scratch()
                else:
                    self._place(slot, span, loaded.n_head, span.start + k)
                pieces.append(_Piece(end, span, loaded.fresh))
                end = span.end
            pieces = self._repair(slot, tokens, pieces, k)
        finally:
            self._clear_scratch()
        placed = 0
        for piece in pieces:
            body = piece.span.start + k
            slot.documents |= {piece.span.document_id}  # so that deleting it finds this slot
            if slot.blended_from is None:
                slot.blended_from = body
            if not piece.fresh:  # computed just now, for this request: not cached tokens
                placed += piece.span.end - body
        if pieces:
            slot.cache.extend(tokens[cur : pieces[-1].span.end])
        task.n_done = len(slot.cache)  # what was decoded or placed
        task.n_cached += placed
        task.chunk_n = placed + max(reused, 0)
        self.stats.tokens += placed

    def _repair(self, slot: Slot, tokens: list[int], pieces: list[_Piece], k: int) -> list[_Piece]:
        """Fill the gap before each placed chunk's body (the prompt tokens since the previous
        chunk, then its first k tokens), in order: decoded into the scratch sequence, which
        first shares the slot's cells before the gap, then shared into the slot. Every chunk is
        placed before the first of these decodes, so the cells they moved are re-roped in one
        K-shift, whose cost grows with the whole cache, not once per chunk. Returns the pieces
        whose gap was filled; the slot is cut back to the first gap that had no room. The
        caller clears the scratch sequence afterwards."""
        model, scratch = self.model, self.scratch
        for i, piece in enumerate(pieces):
            a, b = piece.gap, piece.span.start + k
            self._clear_scratch()
            model.seq_cp(slot.id, scratch, 0, a)
            if not self._decode_seq(scratch, tokens[a:b], a):
                model.seq_rm(slot.id, a, -1)
                return pieces[:i]
            model.seq_cp(scratch, slot.id, a, b)
        return pieces

    def load_chunk(self, salt: str, head: list[int], span: ChunkSpan) -> ChunkLoad:
        """Head + the span's whole chunk into the scratch sequence (positions 0..), from a tier
        or computed and kept (`Loaded.AFTER_HEAD`). A state from a tier that could be shifted
        on the host holds the span's cells after its first k only, at their places
        (`Loaded.AT_PLACE`). `Loaded.NO_ROOM`: the KV had no room for it."""
        state = self.chunks.get(salt, head, span.tokens)
        if state is not None:
            first = len(head) + span.offset  # the span's first token in the state
            body = first + self.sink_tokens  # the slot takes the span's cells from here on
            moved = self.shifter.shift(state.data, body, first + span.length, span.start - first)
            if moved is not None:
                self._clear_scratch()
                if not self.model.state_restore(self.scratch, moved):
                    return ChunkLoad(Loaded.NO_ROOM)
                self.stats.placed += 1
                return ChunkLoad(Loaded.AT_PLACE)
            if not self.model.state_restore(self.scratch, state.data):
                self._clear_scratch()
                return ChunkLoad(Loaded.NO_ROOM)
            self._head_in_scratch = True
            self.stats.placed += 1
            return ChunkLoad(Loaded.AFTER_HEAD, len(head))
        if not self._head_in_scratch:
            self.model.seq_clear(self.scratch)
            if not self._decode_seq(self.scratch, head, 0):
                self._clear_scratch()
                return ChunkLoad(Loaded.NO_ROOM)
            self._head_in_scratch = True
        else:
            self.model.seq_rm(self.scratch, len(head), -1)
        if not self._decode_seq(self.scratch, list(span.tokens), len(head)):
            self._clear_scratch()
            return ChunkLoad(Loaded.NO_ROOM)
        self._keep_seq(self.scratch, salt, head, span.tokens, span.document_id)
        self.stats.computed += 1
        self.stats.placed += 1
        return ChunkLoad(Loaded.AFTER_HEAD, len(head), fresh=True)

    def keep(self, task: Task, slot: Slot) -> None:
        """A `keep_chunk` request ended: its slot's KV (head + chunk, exact, computed in the
        background as any prompt) becomes the chunk's own KV. Where this request computed the
        chunk, the slot then keeps the head only, so the tiers do not hold the chunk twice (as a
        chunk and as a prefix); where a prefix served it (a document's prefill holds it), the
        slot keeps that prefix."""
        keep, prompt = task.request.keep_chunk, task.request.prompt
        n = len(prompt)
        if keep is None or slot.blended_from is not None or len(slot.cache) < n:
            return  # cancelled, or not exact: nothing to keep
        tokens = prompt.text_tokens(0, n)
        head, chunk = tokens[: keep.n_head], tokens[keep.n_head :]
        salt = task.request.cache_salt
        kept = slot.cut_to(n, self.model) == n and not self.chunks.has(salt, head, chunk)
        if kept and self._keep_seq(slot.id, salt, head, chunk, keep.document_id):
            self.stats.kept += 1
        if task.n_cached <= keep.n_head:
            slot.cut_to(keep.n_head, self.model)

    def _keep_seq(
        self, seq: int, salt: str, head: list[int], chunk: Sequence[int], document_id: str
    ) -> bool:
        """The sequence's KV (head + chunk) kept as the chunk's, unless its document was
        deleted meanwhile."""
        if document_id in self.forgotten:
            return False
        blob = self.model.state_blob(seq, self.chunks.host.pool)
        self.chunks.put(salt, head, chunk, blob, document_id)
        return True

    def _place(self, slot: Slot, span: ChunkSpan, n_head: int, first: int) -> None:
        """Move the chunk's cells in the scratch sequence to the span's positions and share
        those from `first` to the span's end into the slot."""
        model, scratch = self.model, self.scratch
        at = span.start - span.offset  # where the chunk's first token lands
        if first < n_head or at < n_head:  # shifted cells would meet the head's positions
            model.seq_rm(scratch, 0, n_head)
            self._head_in_scratch = False
        delta = at - n_head
        if delta:
            model.seq_shift(scratch, n_head, n_head + len(span.tokens), delta)
        model.seq_cp(scratch, slot.id, first, span.end)
        if self._head_in_scratch:
            model.seq_rm(scratch, n_head, -1)
        else:
            model.seq_clear(scratch)

    def _decode_seq(self, seq: int, tokens: list[int], pos: int) -> bool:
        for i in range(0, len(tokens), self.model.n_batch):
            run = tokens[i : i + self.model.n_batch]
            self._batch.clear()
            self._batch.add_run(run, pos + i, seq)
            if self.model.decode(self._batch) != 0:
                return False
        return True

    def _clear_scratch(self) -> None:
        self.model.seq_clear(self.scratch)
        self._head_in_scratch = False

    def clear_scratch(self) -> None:
        """Before the context goes (sleep): nothing is kept in the scratch sequence."""
        if self.scratch is not None and self.model.loaded:
            self._clear_scratch()


@dataclass(slots=True)
class BlendStats:
    """What blend did since start: chunks placed, of those computed (not from a tier), cached
    tokens placed, chunk KV kept from `keep_chunk` requests."""

    placed: int = 0
    computed: int = 0
    tokens: int = 0
    kept: int = 0


class Loaded(Enum):
    """Where `ChunkBlend.load_chunk` left a chunk's KV in the scratch sequence."""

    NO_ROOM = "no_room"  # nowhere: the KV had no room (the chunk is computed in its gap)
    AT_PLACE = "at_place"  # the chunk's cells after its first k, at the span's positions
    AFTER_HEAD = "after_head"  # the head at 0.., the whole chunk after it


@dataclass(frozen=True, slots=True)
class ChunkLoad:
    where: Loaded
    n_head: int = 0  # AFTER_HEAD: the head's length (where the chunk starts in the scratch)
    fresh: bool = False  # its KV was computed now, for this request (not a cached token)


@dataclass(frozen=True, slots=True)
class _Piece:
    """A chunk placed into a slot, its body in and its gap (positions `gap` up to the body:
    the prompt since the previous chunk, then the chunk's first k tokens) still to decode."""

    gap: int
    span: ChunkSpan
    fresh: bool  # its KV was computed for this request
