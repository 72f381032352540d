"""Token sequences with media placeholders, for KV-cache prefix reuse.

This is the Python counterpart of llama.cpp's ``server_tokens`` (tools/server). A prompt is a
flat list of text tokens in which every position taken by a media item (an image) holds the
placeholder ``NULL_TOKEN``; a side map from each media chunk's start index to the chunk says
which image sits there. The engine uses it to find how much of a new prompt a slot's KV cache
already holds (``common_prefix``), to cut the KV back to that point (``keep_first``) and to walk
the uncached rest as text runs and images (``segments``).

A media chunk is matched, kept and cut as ONE unit: its KV entries come from a single encoder
pass over the whole image, so half an image's KV is meaningless and can never be reused or
kept. A prefix therefore never ends strictly inside a chunk.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

NULL_TOKEN: int = -1

# Text runs are compared in slices of this size: list slice equality runs in C, so the only
# Python-level per-token loop is over the one slice that contains the first mismatch.
_CMP_BLOCK = 512


@dataclass(frozen=True, slots=True)
class MediaChunk:
    """One media item: its identity and how much room it takes in tokens and KV positions."""

    id: str  # content hash of the decoded pixels (hex); equal id means the same image
    n_tokens: int  # NULL placeholder positions it takes in the sequence
    n_pos: int  # KV positions it advances (differs from n_tokens for M-RoPE models)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"MediaChunk.id must be a non-empty string, got {self.id!r}")
        if self.n_tokens < 1:
            raise ValueError(f"MediaChunk.n_tokens must be >= 1, got {self.n_tokens}")
        if self.n_pos < 1:
            raise ValueError(f"MediaChunk.n_pos must be >= 1, got {self.n_pos}")


def _as_text_tokens(tokens: Iterable[int]) -> list[int]:
    # operator.index accepts ints (and numpy ints) but rejects floats/strings.
    toks = list(map(operator.index, tokens))
    if toks and min(toks) < 0:
        i = next(k for k, t in enumerate(toks) if t < 0)
        raise ValueError(f"negative text token {toks[i]} at offset {i}")
    return toks


class TokenSequence:
    """Text tokens plus media chunks, mirroring llama.cpp ``server_tokens``.

    Invariants (kept by every mutating method):
      * every chunk covers exactly its ``n_tokens`` NULL placeholders, starting at its key;
      * NULL_TOKEN appears nowhere else (text tokens are >= 0);
      * chunks do not overlap;
      * ``_starts`` is the sorted list of ``_chunks`` keys, and ``_shift[k]`` is the sum of
        ``n_tokens - n_pos`` over chunks ``0..k`` in start order (so positions are O(log k)).
    """

    __slots__ = ("_tokens", "_chunks", "_starts", "_shift")

    def __init__(self, tokens: Iterable[int] = ()) -> None:
        self._tokens: list[int] = _as_text_tokens(tokens)
        self._chunks: dict[int, MediaChunk] = {}
        self._starts: list[int] = []
        self._shift: list[int] = []

    def __len__(self) -> int:
        return len(self._tokens)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenSequence):
            return NotImplemented
        return self._tokens == other._tokens and self._chunks == other._chunks

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __getitem__(self, i: int) -> int:
        if isinstance(i, slice):
            raise TypeError("TokenSequence does not support slicing; use text_tokens()")
        return self._tokens[i]

    def __repr__(self) -> str:
        head = ", ".join(map(str, self._tokens[:8]))
        more = ", ..." if len(self._tokens) > 8 else ""
        return f"TokenSequence(len={len(self)}, media={len(self._starts)}, [{head}{more}])"

    @property
    def tokens(self) -> tuple[int, ...]:
        return tuple(self._tokens)

    @property
    def has_media(self) -> bool:
        return bool(self._starts)

    def copy(self) -> TokenSequence:
        new = TokenSequence()
        new._tokens = self._tokens.copy()
        new._chunks = self._chunks.copy()  # chunks are frozen, sharing them is safe
        new._starts = self._starts.copy()
        new._shift = self._shift.copy()
        return new

    # -- building -------------------------------------------------------------------------

    def append(self, token: int) -> None:
        self._tokens.extend(_as_text_tokens((token,)))

    def extend(self, tokens: Iterable[int]) -> None:
        # Validated in full before anything is appended, so an error leaves self unchanged.
        self._tokens.extend(_as_text_tokens(tokens))

    def add_media(self, chunk: MediaChunk) -> None:
        if not isinstance(chunk, MediaChunk):
            raise TypeError(f"expected MediaChunk, got {type(chunk).__name__}")
        start = len(self._tokens)
        self._tokens.extend([NULL_TOKEN] * chunk.n_tokens)
        self._chunks[start] = chunk
        self._starts.append(start)  # start is past every existing chunk: stays sorted
        prev = self._shift[-1] if self._shift else 0
        self._shift.append(prev + chunk.n_tokens - chunk.n_pos)

    # -- lookup ---------------------------------------------------------------------------

    def media(self) -> list[tuple[int, MediaChunk]]:
        return [(s, self._chunks[s]) for s in self._starts]

    def chunk_at(self, index: int) -> MediaChunk | None:
        return self._chunks.get(index)

    def chunk_containing(self, index: int) -> tuple[int, MediaChunk] | None:
        k = bisect_right(self._starts, index) - 1  # last chunk starting at or before index
        if k < 0:
            return None
        start = self._starts[k]
        chunk = self._chunks[start]
        return (start, chunk) if index < start + chunk.n_tokens else None

    def _inside_chunk(self, index: int) -> bool:
        """True if index lies strictly inside a chunk (not at its start)."""
        hit = self.chunk_containing(index)
        return hit is not None and hit[0] < index

    def text_tokens(self, start: int = 0, end: int | None = None) -> list[int]:
        end = len(self._tokens) if end is None else end
        if not 0 <= start <= end <= len(self._tokens):
            raise ValueError(f"bad range [{start}, {end}) for length {len(self._tokens)}")
        # Chunks are sorted and disjoint, so ends are sorted too: the last chunk starting
        # before `end` is the only candidate to reach past `start`.
        k = bisect_left(self._starts, end) - 1
        if k >= 0 and self._starts[k] + self._chunks[self._starts[k]].n_tokens > start:
            raise ValueError(f"range [{start}, {end}) overlaps media at {self._starts[k]}")
        return self._tokens[start:end]

    def segments(self, start: int = 0) -> Iterator[tuple[int, list[int] | MediaChunk]]:
        if not 0 <= start <= len(self._tokens):
            raise ValueError(f"start {start} out of range for length {len(self._tokens)}")
        if self._inside_chunk(start):
            raise ValueError(f"start {start} falls inside a media chunk")
        pos = start
        for s in self._starts[bisect_left(self._starts, start) :]:
            if s > pos:
                yield pos, self._tokens[pos:s]
            chunk = self._chunks[s]
            yield s, chunk
            pos = s + chunk.n_tokens
        if pos < len(self._tokens):
            yield pos, self._tokens[pos:]

    # -- prefix reuse ---------------------------------------------------------------------

    def common_prefix(self, other: TokenSequence) -> int:
        a, b = self._tokens, other._tokens
        n = min(len(a), len(b))
        # 1) First raw mismatch, NULL matching NULL. Block-wise slice comparison keeps this in C.
        limit = n
        if a[:n] != b[:n]:
            for i in range(0, n, _CMP_BLOCK):
                j = min(i + _CMP_BLOCK, n)
                if a[i:j] != b[i:j]:
                    limit = next(k for k in range(i, j) if a[k] != b[k])
                    break
        # 2) Every chunk of self starting before `limit` must be matched by an equal chunk of
        # other at the same start, else the prefix stops at that chunk's start. Checking self's
        # chunks suffices: a chunk of other starting before `limit` has NULLs that self mirrors,
        # so it lies under a chunk of self starting no later, which either fails first or
        # equals it. Equal chunks have equal n_tokens, so both sides hold NULLs over the whole
        # range and `limit` lies past its end: once they all match, `limit` is inside no chunk.
        # We require full equality (id, n_tokens and n_pos): n_pos shifts every later KV
        # position, so a mismatch there would make the following cached text unusable.
        for s in self._starts[: bisect_left(self._starts, limit)]:
            if self._chunks[s] != other._chunks.get(s):
                return s
        return limit

    def keep_first(self, n: int) -> None:
        if not 0 <= n <= len(self._tokens):
            raise ValueError(f"keep_first({n}) out of range for length {len(self._tokens)}")
        if self._inside_chunk(n):
            raise ValueError(f"keep_first({n}) would cut a media chunk in half")
        del self._tokens[n:]
        k = bisect_left(self._starts, n)  # chunks starting at or past n are dropped
        for s in self._starts[k:]:
            del self._chunks[s]
        del self._starts[k:]
        del self._shift[k:]

    def pos_at(self, index: int) -> int:
        if not 0 <= index <= len(self._tokens):
            raise ValueError(f"index {index} out of range for length {len(self._tokens)}")
        if self._inside_chunk(index):
            raise ValueError(f"index {index} falls inside a media chunk")
        # Not inside a chunk, so every chunk starting before index also ends at or before it.
        k = bisect_left(self._starts, index)
        return index - (self._shift[k - 1] if k else 0)

    @property
    def n_pos(self) -> int:
        return self.pos_at(len(self._tokens))

    def validate(self, n_vocab: int) -> None:
        """Check every invariant and that text tokens fit the vocabulary; ValueError if not."""
        toks = self._tokens
        if self._starts != sorted(self._chunks) or len(self._shift) != len(self._starts):
            raise ValueError("internal chunk index out of sync")
        pos = shift = 0
        for k, s in enumerate(self._starts):
            chunk = self._chunks[s]
            shift += chunk.n_tokens - chunk.n_pos
            if self._shift[k] != shift:
                raise ValueError("internal position index out of sync")
            if s < pos:
                raise ValueError(f"media chunk at {s} overlaps the previous chunk")
            end = s + chunk.n_tokens
            if end > len(toks) or any(t != NULL_TOKEN for t in toks[s:end]):
                raise ValueError(f"media chunk at {s} does not cover {chunk.n_tokens} NULLs")
            self._check_text(pos, s, n_vocab)
            pos = end
        self._check_text(pos, len(toks), n_vocab)

    def _check_text(self, start: int, end: int, n_vocab: int) -> None:
        run = self._tokens[start:end]
        if run and (min(run) < 0 or max(run) >= n_vocab):
            i = next(k for k, t in enumerate(run) if not 0 <= t < n_vocab)
            t = run[i]
            if t == NULL_TOKEN:
                raise ValueError(f"NULL placeholder at index {start + i} is not in a media chunk")
            raise ValueError(f"token {t} at index {start + i} is outside vocab [0, {n_vocab})")
