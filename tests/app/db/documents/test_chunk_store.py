"""ChunkStore on SQLite and PostgreSQL: ingestion writes, retrieval reads, deletes cascade."""

from __future__ import annotations

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_records import NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.store import Store


def test_ingestion_writes_whole_documents_and_deletes_cascade(store: Store):
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 8, None)
    doc, _ = docs.add_document(
        "",
        col.id,
        filename="a.txt",
        kind="text",
        sha256="d" * 64,
        text="hello world",
        page_starts=[],
        metadata={"k": 1},
    )
    assert chunk_store.unfinished() == [doc.id]
    vec = np.ones(4, dtype=np.float32) / 2
    chunks = [NewChunk(i, f"part {i}", i * 5, i * 5 + 4, None, vec) for i in range(3)]
    assert chunk_store.next_number(col.id) == 1
    assert chunk_store.finish_document(doc.id, chunks, "model-a", [[1, 2], [3], [4]], 1)
    assert chunk_store.unfinished() == [] and chunk_store.next_number(col.id) == 4
    stored = docs.chunks("", doc.id, "model-a")
    assert [(c.number, c.token_ids) for c in stored] == [(1, [1, 2]), (2, [3]), (3, [4])]
    assert [c.token_ids for c in docs.chunks("", doc.id, "model-b")] == [None] * 3
    ids, vectors, texts = chunk_store.vectors(col.id, 4)
    assert ids == [c.id for c in stored] and texts == ["part 0", "part 1", "part 2"]
    np.testing.assert_array_equal(vectors[0], vec)
    chunk_store.set_tokens("model-b", {stored[0].id: [9]})
    assert chunk_store.chunks_by_id([stored[0].id], "model-b")[0].token_ids == [9]
    assert docs.get_document("", doc.id).status == "ready"
    assert docs.delete_collection("", col.id) == [doc.id]
    assert chunk_store.chunks_by_id([c.id for c in stored], "model-a") == []
    assert chunk_store.vectors(col.id, 4)[0] == []


def test_vectors_are_replaced_whole_with_their_backend_or_not_at_all(store: Store):
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 8, None)
    doc, _ = docs.add_document(
        "", col.id, filename="a.txt", kind="text", sha256="e" * 64, text="x y",
        page_starts=[], metadata={},
    )  # fmt: skip
    old = np.ones(4, dtype=np.float32) / 2
    chunks = [NewChunk(i, f"part {i}", i, i + 1, None, old) for i in range(2)]
    assert chunk_store.finish_document(doc.id, chunks, "m", [[1], [2]], 1, backend="torch")
    ids, _, _ = chunk_store.vectors(col.id, 4)
    new = np.eye(4, dtype=np.float32)[:2]
    # Not the ready chunks any more (one missing): nothing changes.
    assert not chunk_store.replace_vectors(col.id, ids[:1], new[:1], "onnx-int8")
    assert chunk_store.backend_of(col.id) == "torch"
    np.testing.assert_array_equal(chunk_store.vectors(col.id, 4)[1][0], old)
    assert not chunk_store.replace_vectors("col-gone", ids, new, "onnx-int8")
    version = chunk_store.version(col.id)
    assert chunk_store.replace_vectors(col.id, ids, new, "onnx-int8")
    assert chunk_store.backend_of(col.id) == "onnx-int8"
    np.testing.assert_array_equal(chunk_store.vectors(col.id, 4)[1], new)
    assert chunk_store.version(col.id) > version  # readers resync


def test_ready_documents_of_one_model(store: Store):
    """What a restart prefills: every ready document, or those of one model's collections."""
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    vec = np.ones(4, dtype=np.float32) / 2
    made = {}
    for name, model in (("twin's", "twin"), ("old", None)):
        col = docs.create_collection("", name, 64, 8, None, model=model)
        doc, _ = docs.add_document(
            "", col.id, filename="a.txt", kind="text", sha256=name[0] * 64, text="hello",
            page_starts=[], metadata={},
        )  # fmt: skip
        assert chunk_store.finish_document(
            doc.id, [NewChunk(0, "a", 0, 1, None, vec)], "m", [[1]], 1
        )
        made[name] = doc.id
    assert [d for _, d in chunk_store.ready()] == [made["twin's"], made["old"]]
    assert [(c.model, d) for c, d in chunk_store.ready("twin")] == [("twin", made["twin's"])]
    assert chunk_store.ready("smollm2") == []
