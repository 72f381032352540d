"""CollectionChunks on SQLite and PostgreSQL: a whole collection in its stable order."""

from __future__ import annotations

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.collection_chunks import CollectionChunks
from app.db.documents.document_records import NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.store import Store

VEC = np.ones(4, dtype=np.float32) / 2


def add(docs: DocumentStore, col: str, name: str) -> str:
    doc, _ = docs.add_document(
        "", col, filename=name, kind="text", sha256=name.ljust(64, "0"), text=name,
        page_starts=[], metadata={},
    )  # fmt: skip
    return doc.id


def finish(chunk_store: ChunkStore, col: str, doc: str, n: int, token: int) -> None:
    chunks = [NewChunk(i, f"{doc} {i}", i, i + 1, None, VEC) for i in range(n)]
    first = chunk_store.next_number(col)
    tokens = [[token, i] for i in range(n)]
    assert chunk_store.finish_document(doc, chunks, "m", tokens, first)


def test_chunks_come_in_the_order_their_documents_became_ready(store: Store):
    docs, chunk_store, reader = DocumentStore(store), ChunkStore(store), CollectionChunks(store)
    col = docs.create_collection("", "c", 64, 8, None, mode="full")
    assert reader.size(col.id).documents == 0 and reader.chunks(col.id, "m")[1] == []
    # Uploaded a, b, c; b is made ready first, then a: the order is readiness, not upload.
    a, b, c = add(docs, col.id, "a"), add(docs, col.id, "b"), add(docs, col.id, "c")
    finish(chunk_store, col.id, b, 2, 20)
    finish(chunk_store, col.id, a, 1, 10)
    version, chunks = reader.chunks(col.id, "m")
    assert [(ch.document_id, ch.ordinal) for ch in chunks] == [(b, 0), (b, 1), (a, 0)]
    assert [ch.token_ids for ch in chunks] == [[20, 0], [20, 1], [10, 0]]
    assert [ch.filename for ch in chunks] == ["b", "b", "a"]
    assert reader.chunks(col.id, "other")[1][0].token_ids is None  # not stored for that model
    size = reader.size(col.id)
    assert (size.documents, size.tokens, size.version) == (2, 6, version)
    # A document made ready later goes last: what was there stays a prefix.
    finish(chunk_store, col.id, c, 1, 30)
    later_version, later = reader.chunks(col.id, "m")
    assert later[:3] == chunks and later[3].document_id == c and later_version > version
    # Deleting one takes its chunks out where they were.
    docs.delete_document("", b)
    assert [ch.document_id for ch in reader.chunks(col.id, "m")[1]] == [a, c]
    assert reader.size(col.id).tokens == 4
    assert reader.size("col-gone") is None


def test_full_collections_are_those_with_a_ready_document(store: Store):
    docs, chunk_store, reader = DocumentStore(store), ChunkStore(store), CollectionChunks(store)
    full = docs.create_collection("", "full", 64, 8, None, mode="full", model="x")
    empty = docs.create_collection("", "empty", 64, 8, None, mode="full", model="x")
    plain = docs.create_collection("", "plain", 64, 8, None, model="x")
    for col in (full, plain):
        finish(chunk_store, col.id, add(docs, col.id, col.name), 1, 1)
    add(docs, empty.id, "queued")  # not ready
    assert [c.id for c in reader.full_collections()] == [full.id]
    assert [c.id for c in reader.full_collections("x")] == [full.id]
    assert reader.full_collections("y") == []
    assert reader.collection(full.id).mode == "full" and reader.collection("col-x") is None
    assert docs.update_collection("", plain.id, {"mode": "full"}).mode == "full"
    assert [c.id for c in reader.full_collections()] == [full.id, plain.id]
    assert docs.update_collection("other-tenant", plain.id, {"mode": "retrieval"}) is None
