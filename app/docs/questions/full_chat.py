"""A chat turn's collections whole: full-document mode in chats and session turns.

A `rag` turn whose collections are all in full mode gets them whole, as `/ask` does: the
collection's prefix (app/docs/questions/collection_prefix.py: the document head, then every
ready chunk in the collection's stable order), which the background computes once under the
tenant's salt; then the conversation (app/chat/full_prompt.py). Several collections go in the
order the `rag` names them: the first one's head and prefix, then each other's chunks. So the
first collection's prefix is the one every `/ask` question, chat and session turn of the tenant
shares; the others' chunks are computed by the turn (and reused by that conversation's later
turns, whose prompts extend it). The search fields (`top_k`, `document_ids`, ...) say nothing
here, as on `/ask`. A turn must leave the answer room (`over`); one that does not, or whose
collections are over the context together, is answered by retrieval. The reply's citations
are found from the answer (app/docs/questions/answer_sources.py), since the prompt holds every
chunk.
"""

from __future__ import annotations

import asyncio
import hashlib
from array import array

from app.chat.turn_sources import Citation, WholeSources
from app.db.documents.document_records import CollectionRecord
from app.docs.questions.answer_sources import used_chunks
from app.docs.questions.chat_sources import citation
from app.docs.questions.collection_prefix import CollectionPrefix, CollectionPrefixes
from app.docs.questions.doc_prompt import DEFAULT_SYSTEM_PROMPT, INSTRUCTION, QUESTION, SENTINEL


def joined(prefixes: list[CollectionPrefix]) -> CollectionPrefix:
    """The first prefix, then every other one's chunks (their heads left out)."""
    first = prefixes[0]
    if len(prefixes) == 1:
        return first
    tokens, chunks = list(first.tokens), list(first.chunks)
    indexed = list(first.indexed)
    for p in prefixes[1:]:
        tokens.extend(p.tokens[p.head_len :])
        chunks.extend(p.chunks)
        indexed.extend(p.indexed)
    documents = frozenset().union(*(p.documents for p in prefixes))
    version = first.version  # (not a collection's: a joined prefix is never kept)
    # (The parts' indexes, each computed once.)
    return CollectionPrefix(
        tokens, chunks, first.head_len, len(tokens), version, documents, _indexed=indexed
    )


async def chat_prefix(
    prefixes: CollectionPrefixes,
    collections: list[CollectionRecord],
    question: str,
    before: frozenset[str],
) -> WholeSources | None:
    """The collections whole before a chat turn whose new message is `question`; `before`: the
    documents that earlier messages of the conversation cite. None when they are over the
    context together (the rest is not read): answered by retrieval."""

    def read() -> list[CollectionPrefix] | None:  # database reads, and the citations' indexes
        found: list[CollectionPrefix] = []
        size = 0
        for c in collections:
            p = prefixes.prefix(c)
            size += p.n_tokens - (p.head_len if found else 0)
            if size > prefixes.n_ctx or (not p.tokens and not p.empty):
                return None
            found.append(p)
        for p in found:
            _ = p.indexed
        return found

    found = await asyncio.to_thread(read)
    if found is None:
        return None
    prefix = joined(found)
    tokens = prefix.tokens

    def cite(answer: str) -> list[Citation]:
        used = used_chunks(answer, question, prefix.chunks, prefix.indexed)
        return [citation(u.chunk, u.score) for u in used]

    def over(n: int, limit: int | None) -> int:
        # The conversation and the answer share the reserve, as a question and its answer do
        # on /ask, but a long conversation leaves the answer at least half of it: a turn with
        # less room is answered by retrieval, not cut short.
        room = max(prefixes.reserve - n, prefixes.reserve // 2, 1)
        room = room if limit is None else min(room, limit)
        return prefix.n_tokens + n + room - prefixes.n_ctx

    key = hashlib.blake2b(array("i", tokens).tobytes(), digest_size=16).hexdigest()
    return WholeSources(
        tokens,
        prefix.head_len,
        collections[0].system_prompt or DEFAULT_SYSTEM_PROMPT,
        INSTRUCTION + SENTINEL,
        SENTINEL,
        QUESTION,
        prefix.documents | before,
        cite,
        over,
        key,
    )
