"""A chat turn's collections whole: the first one's prefix, then the others' chunks, their
documents, their fit with a conversation, and the citations found from an answer; on a real
SQLite database, with the stand-in head of test_collection_prefix.py."""

from __future__ import annotations

import asyncio

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_records import CollectionRecord, NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from app.docs.questions.doc_prompt import DEFAULT_SYSTEM_PROMPT, SENTINEL
from app.docs.questions.full_chat import chat_prefix
from tests.app.docs.questions.test_collection_prefix import HEAD, prefixes

HARBOUR = "The harbour of Velmora was built in 1642 by the merchant guild."
MILL = "The old mill of Velmora grinds barley with a wheel turned by the river."


def collection(store: Store, system_prompt: str | None = None) -> CollectionRecord:
    return DocumentStore(store).create_collection("", "c", 64, 8, system_prompt, mode="full")


def ready(store: Store, col: str, name: str, texts: list[str], tokens: list[int]) -> str:
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    doc, _ = docs.add_document(
        "", col, filename=name, kind="text", sha256=name.ljust(64, "0"), text=name,
        page_starts=[], metadata={},
    )  # fmt: skip
    vec = np.ones(4, dtype=np.float32) / 2
    chunks = [NewChunk(i, t, 0, len(t), None, vec) for i, t in enumerate(texts)]
    ids = [[tokens[i]] * 10 for i in range(len(texts))]
    assert chunk_store.finish_document(doc.id, chunks, "m", ids, chunk_store.next_number(col))
    return doc.id


def test_several_collections_are_the_first_prefix_then_the_others_chunks(store):
    first, second = collection(store, "Be exact."), collection(store)
    harbour = ready(store, first.id, "harbour.txt", [HARBOUR], [10])
    mill = ready(store, second.id, "mill.txt", [MILL], [20])
    p = prefixes(store, n_ctx=100, reserve=10)
    whole = asyncio.run(chat_prefix(p, [first, second], "Who?", frozenset({"doc-earlier"})))
    assert whole is not None
    assert whole.tokens == [*HEAD, *[10] * 10, *[20] * 10] and whole.head == len(HEAD)
    assert whole.system == "Be exact."  # the first collection's head
    assert whole.marker == SENTINEL and whole.opening.endswith(SENTINEL)
    assert whole.documents == {harbour, mill, "doc-earlier"}
    # 23 tokens of prefix in a context of 100. A short conversation and the answer share the
    # reserve of 10, as a question and its answer on /ask; a long one leaves the answer half.
    assert whole.over(3, None) == 23 + 3 + 7 - 100
    assert whole.over(72, None) == 0 and whole.over(73, None) == 1
    assert whole.over(73, 4) == 0  # an answer of at most 4 tokens asked for
    # The answer's citations: the chunk it quoted, from whichever collection.
    cited = whole.cite("It grinds barley with a wheel turned by the river.")
    assert [c.document_id for c in cited] == [mill]
    assert whole.cite("Nothing of the sort.") == []
    # Alone, the second one is its own prefix, with the default system prompt.
    alone = asyncio.run(chat_prefix(p, [second], "Who?", frozenset()))
    assert alone is not None and alone.system == DEFAULT_SYSTEM_PROMPT
    assert alone.tokens == [*HEAD, *[20] * 10] and alone.key != whole.key


def test_collections_over_the_context_together_are_not_read_whole(store):
    first, second = collection(store), collection(store)
    ready(store, first.id, "a.txt", [HARBOUR] * 6, [1, 2, 3, 4, 5, 6])
    ready(store, second.id, "b.txt", [MILL] * 6, [1, 2, 3, 4, 5, 6])
    p = prefixes(store, n_ctx=100, reserve=10)
    assert asyncio.run(chat_prefix(p, [first], "?", frozenset())) is not None  # 63 tokens
    assert asyncio.run(chat_prefix(p, [first, second], "?", frozenset())) is None  # 123
    reads = p.reader.reads
    third = collection(store)
    ready(store, third.id, "c.txt", [MILL] * 6, [1, 2, 3, 4, 5, 6])
    assert asyncio.run(chat_prefix(p, [first, second, third], "?", frozenset())) is None
    assert p.reader.reads == reads  # the two kept; the third never read
