"""DocumentStore on SQLite and PostgreSQL: tenants, duplicates, cascades, ingestion writes."""

from __future__ import annotations

import numpy as np

from app.db.document_records import NewChunk
from app.db.document_store import DocumentStore
from app.db.store import Store


def add(docs: DocumentStore, tenant: str, col: str, sha: str, name: str = "a.txt"):
    return docs.add_document(
        tenant,
        col,
        filename=name,
        kind="text",
        sha256=sha * 64,
        text="hello world",
        page_starts=[],
        metadata={"k": 1},
    )


def test_tenants_see_only_their_own(store: Store):
    docs = DocumentStore(store)
    mine = docs.create_collection("t1", "mine", 64, 8, None)
    docs.create_collection("t2", "theirs", 64, 8, "be brief")
    assert [c.name for c in docs.list_collections("t1")] == ["mine"]
    assert docs.get_collection("t2", mine.id) is None
    assert add(docs, "t2", mine.id, "a") is None
    doc, duplicate = add(docs, "t1", mine.id, "a")
    assert not duplicate and doc.status == "queued" and doc.metadata == {"k": 1}
    assert docs.get_document("t2", doc.id) is None
    assert docs.delete_document("t2", doc.id) is None
    assert docs.delete_collection("t2", mine.id) is None
    assert docs.get_document("t1", doc.id) is not None


def test_same_content_is_one_document_per_collection(store: Store):
    docs = DocumentStore(store)
    a = docs.create_collection("", "a", 64, 8, None)
    b = docs.create_collection("", "b", 64, 8, None)
    first, _ = add(docs, "", a.id, "c")
    again, duplicate = add(docs, "", a.id, "c", name="other.txt")
    assert duplicate and again.id == first.id
    elsewhere, duplicate = add(docs, "", b.id, "c")
    assert not duplicate and elsewhere.id != first.id


def test_ingestion_writes_whole_documents_and_deletes_cascade(store: Store):
    docs = DocumentStore(store)
    col = docs.create_collection("", "c", 64, 8, None)
    doc, _ = add(docs, "", col.id, "d")
    assert docs.unfinished() == [doc.id]
    vec = np.ones(4, dtype=np.float32) / 2
    chunks = [NewChunk(i, f"part {i}", i * 5, i * 5 + 4, None, vec) for i in range(3)]
    assert docs.next_number(col.id) == 1
    assert docs.finish_document(doc.id, chunks, "model-a", [[1, 2], [3], [4]], 1)
    assert docs.unfinished() == [] and docs.next_number(col.id) == 4
    stored = docs.chunks("", doc.id, "model-a")
    assert [(c.number, c.token_ids) for c in stored] == [(1, [1, 2]), (2, [3]), (3, [4])]
    assert [c.token_ids for c in docs.chunks("", doc.id, "model-b")] == [None] * 3
    ids, vectors, texts = docs.vectors(col.id, 4)
    assert ids == [c.id for c in stored] and texts == ["part 0", "part 1", "part 2"]
    np.testing.assert_array_equal(vectors[0], vec)
    docs.set_tokens("model-b", {stored[0].id: [9]})
    assert docs.chunks_by_id([stored[0].id], "model-b")[0].token_ids == [9]
    assert docs.get_document("", doc.id).status == "ready"
    assert docs.delete_collection("", col.id) == [doc.id]
    assert docs.chunks_by_id([c.id for c in stored], "model-a") == []
    assert docs.vectors(col.id, 4)[0] == []
