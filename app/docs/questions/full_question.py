"""A question in full-document mode: the collection's whole prefix, then the question.

The prompt is the collection's prefix (app/docs/questions/collection_prefix.py: head, every ready
chunk in the stable order) and the question's tail, the same pieces and the same token ids a
retrieval question lays out, so the prefix a cache tier holds (computed in the background, or
by any earlier question of the tenant) is reused whole. A collection that does not fit the
context one request may use is refused with a 400 that says by how much, unless the request
asked for the retrieval fallback (then None: the caller answers by retrieval). The citations are
found from the answer (app/docs/questions/answer_sources.py), since the prompt holds every chunk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from app.chat.turn_sources import Citation
from app.db.documents.document_records import ChunkRecord, CollectionRecord
from app.docs.questions.answer_sources import used_chunks
from app.docs.questions.chat_sources import citation
from app.docs.questions.collection_prefix import CollectionPrefix, CollectionPrefixes
from app.docs.questions.retrieval import DocQuestion
from app.engine.request import RequestError
from rag.layout import Layout, LayoutChunk

FALLBACK = "retrieval"  # the one fallback there is


def too_long(message: str) -> RequestError:
    return RequestError(message, param="mode", code="collection_too_long")


async def full_question(
    prefixes: CollectionPrefixes,
    collection: CollectionRecord,
    question: str,
    tail: list[int],
    answer_limit: int | None,
    fallback: str | None,
) -> DocQuestion | None:
    """The laid-out full-mode prompt; None when it does not fit and `fallback` is retrieval.
    `answer_limit`: the request's max_tokens (None: none)."""
    start = time.perf_counter()
    prefix = await asyncio.to_thread(prefixes.prefix, collection)  # database reads
    fit = prefixes.fit(prefix, len(tail), answer_limit)
    if fit.over > 0 or (not prefix.tokens and not prefix.empty):
        if fallback == FALLBACK:
            return None
        raise too_long(fit.message())
    await asyncio.to_thread(lambda: prefix.indexed)  # the citations' index, off the event loop
    layout = Layout(
        [*prefix.tokens, *tail],
        [_piece(c) for c in prefix.chunks],
        prefix.head_len,
        len(prefix.tokens),
    )
    ms = (time.perf_counter() - start) * 1000
    scores = dict.fromkeys((c.id for c in prefix.chunks), 0.0)
    asked = DocQuestion(layout, list(prefix.chunks), scores, ms, mode="full")
    asked.cite = _citer(prefix, question)
    return asked


def _piece(c: ChunkRecord) -> LayoutChunk:
    return LayoutChunk(c.id, c.document_id, c.ordinal, c.number, tuple(c.token_ids or ()))


def _citer(prefix: CollectionPrefix, question: str) -> Callable[[str], list[Citation]]:
    def cite(answer: str) -> list[Citation]:
        used = used_chunks(answer, question, prefix.chunks, prefix.indexed)
        return [citation(u.chunk, u.score) for u in used]

    return cite
