"""From a question to a laid-out prompt: search, chunk token ids, cached-first layout.

The layout's order asks the engine's prefix caches (on the engine thread, between steps) how
much of each candidate prefix they hold; the scheduler never sees any of this.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.chat.turn_sources import Citation
from app.db.documents.document_records import ChunkRecord
from app.docs.document_service import Documents
from app.engine.blend_plan import BlendPlan
from app.engine.engine import Engine
from rag.layout import Layout, LayoutChunk, build


@dataclass(slots=True)
class Retrieved:
    chunks: list[ChunkRecord]  # best first
    scores: dict[int, float]  # by chunk id
    ms: float


@dataclass(slots=True)
class DocQuestion:
    layout: Layout
    chunks: list[ChunkRecord]  # in prompt order
    scores: dict[int, float]
    retrieval_ms: float
    blend: BlendPlan | None = None  # where the prompt holds its chunks, when it blends
    mode: str = "retrieval"  # retrieval | full: what was put before the question
    # Full mode: the citations of an answer, found from its text (the prompt holds every chunk);
    # None: the chunks of the prompt are the citations, known before the answer.
    cite: Callable[[str], list[Citation]] | None = None

    @property
    def documents(self) -> frozenset[str]:
        return frozenset(c.document_id for c in self.chunks)


async def search(
    docs: Documents,
    collection_id: str,
    query: str,
    top_k: int,
    score_threshold: float | None,
    document_ids: list[str] | None,
    hybrid: bool,
) -> Retrieved:
    start = time.perf_counter()

    def run() -> Retrieved:
        allowed = (
            docs.chunk_store.chunk_ids_of(collection_id, document_ids)
            if document_ids is not None
            else None
        )
        hits = docs.library.search(collection_id, query, top_k, score_threshold, allowed, hybrid)
        chunks = docs.chunk_store.chunks_by_id([h.chunk_id for h in hits], docs.model_key)
        docs.token_ids(chunks)
        return Retrieved(chunks, {h.chunk_id: h.score for h in hits}, 0.0)

    found = await asyncio.to_thread(run)  # embedding and database: off the event loop
    found.ms = (time.perf_counter() - start) * 1000
    return found


async def lay_out(
    engine: Engine, head: list[int], tail: list[int], found: Retrieved, salt: str
) -> DocQuestion:
    """The prompt: head, chunks (cached ones first, in the cache's order; the rest canonical),
    tail. Falls back to canonical order when the engine cannot be asked."""
    start = time.perf_counter()
    pieces = [
        LayoutChunk(c.id, c.document_id, c.ordinal, c.number, tuple(c.token_ids or ()))
        for c in found.chunks
    ]

    def covered(tokens: list[int]) -> int:  # on the engine thread
        return engine.cached_length(salt, tokens)

    layout = await asyncio.wrap_future(engine.call(lambda: build(head, pieces, tail, covered)))
    by_id = {c.id: c for c in found.chunks}
    ordered = [by_id[p.chunk_id] for p in layout.chunks]
    ms = found.ms + (time.perf_counter() - start) * 1000
    return DocQuestion(layout, ordered, found.scores, ms)
