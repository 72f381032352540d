"""`BlendPlan`: where a prompt holds document chunks whose KV may be reused at any position.

A document prompt places retrieved chunks after a head (system prompt, "Sources:"). Each chunk's
KV is computed once on its own, after the collection's head (as EPIC does), and kept by content
(app/cache/chunk_kv.py); a later prompt that holds the chunk anywhere gets that KV moved to the
chunk's position instead of computing it (app/engine/blend/chunk_blend.py).

A span says which prompt tokens are which chunk tokens: prompt[start:start + length] ==
tokens[offset:offset + length]. A chat prompt renders the chunks' text inside a message, so a
chunk's first or last token may be tokenized together with its neighbours there: `find_spans`
finds the longest run of the chunk's stored tokens in the prompt, and only that run is reused.

Invariants of `find_spans`' result: spans are sorted by start, never overlap, and each matches
the prompt exactly as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# A run shorter than this is not worth placing: recomputing it costs about what placing does.
MIN_SPAN = 16
PROBE = 8  # tokens of a chunk looked up in the prompt to find where the chunk is


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    start: int  # prompt position of the run's first token
    document_id: str  # deleting the document purges the chunk's KV
    tokens: tuple[int, ...]  # the whole chunk, as stored (the cache key is over these)
    offset: int = 0  # the run's first token in `tokens`
    length: int = -1  # -1: the whole chunk

    def __post_init__(self) -> None:
        if self.length < 0:
            object.__setattr__(self, "length", len(self.tokens) - self.offset)

    @property
    def end(self) -> int:
        return self.start + self.length

    def after(self, pos: int) -> ChunkSpan:
        """The part of the span from prompt position `pos` on (a prefix may hold its start)."""
        cut = min(max(pos - self.start, 0), self.length)
        return ChunkSpan(
            self.start + cut, self.document_id, self.tokens, self.offset + cut, self.length - cut
        )


@dataclass(frozen=True, slots=True)
class ChunkKeep:
    """What a background request that computes one chunk's own KV carries: its prompt is the
    collection's head (the first `n_head` tokens) and then the chunk; when it ends, the slot's
    KV is kept as that chunk's KV (`ChunkBlend.keep`)."""

    n_head: int
    document_id: str


@dataclass(slots=True)
class BlendPlan:
    """What a `"kv_reuse": "blend"` request carries: the head each chunk's KV is computed
    after (the collection's document head) and the chunks' places in the prompt."""

    head: list[int]
    spans: list[ChunkSpan] = field(default_factory=list)


def find_spans(
    prompt: Sequence[int], chunks: Sequence[tuple[str, Sequence[int]]], min_span: int = MIN_SPAN
) -> list[ChunkSpan]:
    """Where each (document id, chunk tokens) lies in `prompt`: the longest run of the chunk's
    tokens found there, at least `min_span` long; chunks not found are left out. A chunk is
    looked for after the spans already taken, then anywhere free."""
    spans: list[ChunkSpan] = []
    taken: list[tuple[int, int]] = []
    for document_id, tokens in chunks:
        found = _locate(prompt, tuple(tokens), taken)
        if found is None:
            continue
        start, offset, length = found
        if length < min_span:
            continue
        spans.append(ChunkSpan(start, document_id, tuple(tokens), offset, length))
        taken.append((start, start + length))
    return sorted(spans, key=lambda s: s.start)


def _locate(
    prompt: Sequence[int], tokens: tuple[int, ...], taken: list[tuple[int, int]]
) -> tuple[int, int, int] | None:
    """(prompt start, chunk offset, length) of the longest run of `tokens` in `prompt` that
    avoids `taken`, anchored on probes of the chunk's tokens: after its first one (which may be
    merged with what precedes it) and in its middle."""
    n = len(tokens)
    if n == 0:
        return None
    best: tuple[int, int, int] | None = None
    for probe_at in sorted({min(1, n - 1), max(0, (n - PROBE) // 2)}):
        found = _extend(prompt, tokens, probe_at, taken)
        if found is not None and (best is None or found[2] > best[2]):
            best = found
    return best


def _extend(
    prompt: Sequence[int], tokens: tuple[int, ...], probe_at: int, taken: list[tuple[int, int]]
) -> tuple[int, int, int] | None:
    """The longest run around each place the probe at `probe_at` occurs."""
    n = len(tokens)
    probe = tokens[probe_at : probe_at + PROBE]
    best: tuple[int, int, int] | None = None
    for i in range(len(prompt) - len(probe) + 1):
        if prompt[i] != probe[0] or tuple(prompt[i : i + len(probe)]) != probe:
            continue
        start, offset = i, probe_at
        while offset > 0 and start > 0 and prompt[start - 1] == tokens[offset - 1]:
            start, offset = start - 1, offset - 1
        length = 0
        while (
            start + length < len(prompt)
            and offset + length < n
            and prompt[start + length] == tokens[offset + length]
        ):
            length += 1
        start, offset, length = _clip(start, offset, length, taken)
        if length > 0 and (best is None or length > best[2]):
            best = (start, offset, length)
    return best


def _clip(
    start: int, offset: int, length: int, taken: list[tuple[int, int]]
) -> tuple[int, int, int]:
    """The run cut so that it overlaps none of `taken` (the longest piece left)."""
    pieces = [(start, start + length)]
    for a, b in taken:
        nxt = []
        for s, e in pieces:
            if e <= a or s >= b:
                nxt.append((s, e))
                continue
            if s < a:
                nxt.append((s, a))
            if e > b:
                nxt.append((b, e))
        pieces = nxt
    if not pieces:
        return start, offset, 0
    s, e = max(pieces, key=lambda p: p[1] - p[0])
    return s, offset + (s - start), e - s
