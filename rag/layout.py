"""The prompt layout of a document question: head, retrieved chunks, tail (the question).

Each chunk's token ids (its numbered header plus its text) were computed once at ingest and are
spliced in as they are, never re-tokenized with their neighbours, so a chunk is the same tokens in
every prompt. The chunks' order depends only on the set retrieved, never on retrieval order or
scores: first the chunks a cached prefix already holds, in the order it holds them; then the rest
in canonical order (document id, then ordinal). The same set therefore always gives the same token
prefix, and a set that extends a cached one reuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LayoutChunk:
    chunk_id: int
    document_id: str
    ordinal: int
    number: int  # the [n] of its header, the citation index
    tokens: tuple[int, ...]  # header + text, tokenized once at ingest

    @property
    def key(self) -> tuple[str, int]:
        return (self.document_id, self.ordinal)


@dataclass(slots=True)
class Layout:
    tokens: list[int]
    chunks: list[LayoutChunk]  # in prompt order
    head_len: int
    context_len: int  # head + chunks: the part a repeated document question reuses


# covered(tokens) -> how many leading tokens of `tokens` some cache holds.
Covered = Callable[[list[int]], int]


def canonical(chunks: Sequence[LayoutChunk]) -> list[LayoutChunk]:
    unique = {c.key: c for c in chunks}
    return [unique[k] for k in sorted(unique)]


def order(
    head: list[int], chunks: Sequence[LayoutChunk], covered: Covered | None
) -> list[LayoutChunk]:
    """Cached chunks first, in the cache's order; the rest canonical.

    Greedy: after head + the chunks placed so far, place the (canonically first) remaining chunk
    whose whole tokens the cache holds next; stop at the first position no chunk fills.
    """
    rest = canonical(chunks)
    if covered is None:
        return rest
    placed: list[LayoutChunk] = []
    prefix = list(head)
    while rest:
        nxt = next(
            (c for c in rest if covered([*prefix, *c.tokens]) >= len(prefix) + len(c.tokens)), None
        )
        if nxt is None:
            break
        placed.append(nxt)
        prefix.extend(nxt.tokens)
        rest.remove(nxt)
    return placed + rest


def build(
    head: list[int], chunks: Sequence[LayoutChunk], tail: list[int], covered: Covered | None = None
) -> Layout:
    ordered = order(head, chunks, covered)
    tokens = list(head)
    for c in ordered:
        tokens.extend(c.tokens)
    context_len = len(tokens)
    tokens.extend(tail)
    return Layout(tokens, ordered, len(head), context_len)


def header(number: int, filename: str, page: int | None) -> str:
    """The numbered line in front of a chunk's text: `[2] report.pdf, p. 3`."""
    return f"[{number}] {filename}" + (f", p. {page}" if page is not None else "") + "\n"


def chunk_text(number: int, filename: str, page: int | None, text: str) -> str:
    """What a chunk's token ids spell: header, text, and a blank line to close it."""
    return header(number, filename, page) + text + "\n\n"
