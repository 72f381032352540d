"""A collection's whole prefix (full-document mode): read once per version, in the stable order,
and how it fits the context; on a real SQLite database, with a stand-in for the chat template."""

from __future__ import annotations

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.collection_chunks import CollectionChunks
from app.db.documents.document_records import ChunkRecord, NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from app.docs.questions.collection_prefix import CollectionPrefixes

HEAD = [1, 2, 3]


class Prompts:
    """The head and tail of a document question, as DocPrompter gives them."""

    def parts(self, system_prompt: str | None, question: str) -> tuple[list[int], list[int]]:
        return list(HEAD), [9] * len(question.split())


class Reader(CollectionChunks):
    """Counts whole reads of a collection."""

    reads = 0

    def chunks(self, collection_id: str, model: str) -> tuple[int, list[ChunkRecord]]:
        self.reads += 1
        return super().chunks(collection_id, model)


def ready(store: Store, col: str, name: str, tokens: list[list[int]]) -> str:
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    doc, _ = docs.add_document(
        "", col, filename=name, kind="text", sha256=name.ljust(64, "0"), text=name,
        page_starts=[], metadata={},
    )  # fmt: skip
    vec = np.ones(4, dtype=np.float32) / 2
    chunks = [NewChunk(i, f"{name} {i}", i, i + 1, None, vec) for i in range(len(tokens))]
    assert chunk_store.finish_document(doc.id, chunks, "m", tokens, chunk_store.next_number(col))
    return doc.id


def prefixes(store: Store, n_ctx: int = 100, reserve: int = 10) -> CollectionPrefixes:
    def fill(chunks: list[ChunkRecord]) -> None:
        for c in chunks:
            c.token_ids = c.token_ids if c.token_ids is not None else [7]

    return CollectionPrefixes(Reader(store), Prompts(), fill, "m", n_ctx, reserve)  # type: ignore[arg-type]


def test_the_prefix_is_the_head_then_every_chunk_by_number_and_read_once_per_version(store):
    col = DocumentStore(store).create_collection("", "c", 64, 8, None, mode="full")
    p = prefixes(store)
    empty = p.prefix(col)
    assert empty.empty and empty.tokens == HEAD and p.reader.reads == 0
    a = ready(store, col.id, "a", [[10, 11], [12]])
    first = p.prefix(col)
    assert first.tokens == [*HEAD, 10, 11, 12] and first.documents == {a}
    assert p.prefix(col) is first and p.reader.reads == 1  # kept while the version stands
    b = ready(store, col.id, "b", [[20]])
    second = p.prefix(col)
    assert second.tokens[: len(first.tokens)] == first.tokens  # appended, the rest unchanged
    assert second.tokens == [*first.tokens, 20] and second.documents == {a, b}
    assert p.reader.reads == 2
    DocumentStore(store).delete_document("", a)
    assert p.prefix(col).tokens == [*HEAD, 20]


def test_fit_says_by_how_much_a_collection_is_over_the_context(store):
    col = DocumentStore(store).create_collection("", "c", 64, 8, None, mode="full")
    ready(store, col.id, "a", [[5] * 40, [6] * 40])
    p = prefixes(store, n_ctx=100, reserve=10)
    prefix = p.prefix(col)
    assert prefix.n_tokens == 83
    assert p.fit(prefix).over == 83 + 10 - 100  # alone: the reserve kept free
    fit = p.fit(prefix, question=4)
    assert (fit.question, fit.room, fit.over) == (4, 6, -7)  # the reserve covers both
    assert p.fit(prefix, question=4, answer=2).room == 2  # a shorter answer asked for
    assert p.fit(prefix, question=30).over == 83 + 30 + 1 - 100  # a long question: one left
    tight = prefixes(store, n_ctx=80, reserve=10)
    over = tight.fit(tight.prefix(col), question=3)
    assert over.over == 83 + 3 + 7 - 80
    assert "13 tokens over the context of 80" in over.message()


def test_a_collection_far_over_the_context_is_sized_from_its_rows_not_read(store):
    col = DocumentStore(store).create_collection("", "c", 64, 8, None, mode="full")
    ready(store, col.id, "a", [[5] * 150, [6] * 150])
    p = prefixes(store, n_ctx=100)
    prefix = p.prefix(col)
    assert prefix.tokens == [] and prefix.n_tokens == 303 and not prefix.empty
    assert p.reader.reads == 0 and p.fit(prefix).over > 0


def test_kept_prefixes_are_bounded_in_tokens(store):
    docs = DocumentStore(store)
    p = CollectionPrefixes(Reader(store), Prompts(), lambda c: None, "m", 100, 10, keep_tokens=50)  # type: ignore[arg-type]
    cols = [docs.create_collection("", f"c{i}", 64, 8, None, mode="full") for i in range(3)]
    for i, col in enumerate(cols):
        ready(store, col.id, f"d{i}", [[i] * 20])
    for col in cols:
        p.prefix(col)
    assert p.reader.reads == 3
    p.prefix(cols[2])  # still kept (the newest)
    p.prefix(cols[0])  # dropped for the others: read again
    assert p.reader.reads == 4
