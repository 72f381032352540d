from __future__ import annotations

from pathlib import Path

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_records import NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from app.docs.library import DocLibrary
from rag.index import VectorIndex

DIM = 8


def unit(rows: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_search_is_exact_inner_product_and_filters():
    vectors = unit(20, 1)
    index = VectorIndex.build(DIM, list(range(100, 120)), vectors)
    hits = index.search(vectors[3], 5)
    assert hits[0][0] == 103 and abs(hits[0][1] - 1.0) < 1e-5
    expected = sorted(range(20), key=lambda i: -float(vectors[i] @ vectors[3]))[:5]
    assert [c for c, _ in hits] == [100 + i for i in expected]
    assert [c for c, _ in index.search(vectors[3], 5, allowed={105, 107})] == sorted(
        [105, 107], key=lambda c: -float(vectors[c - 100] @ vectors[3])
    )


def test_saved_index_loads_only_when_it_matches(tmp_path: Path):
    path = tmp_path / "c.faiss"
    VectorIndex.build(DIM, [1, 2, 3], unit(3, 2)).save(path)
    assert VectorIndex.load(path, DIM, {1, 2, 3}) is not None
    assert VectorIndex.load(path, DIM, {1, 2}) is None  # stale: the database changed
    assert VectorIndex.load(tmp_path / "missing.faiss", DIM, {1}) is None
    path.write_bytes(path.read_bytes()[:50])
    assert VectorIndex.load(path, DIM, {1, 2, 3}) is None  # damaged


def test_index_rebuilt_from_the_database_equals_the_saved_one(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path}/t.db")
    store.migrate()
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 0, None)
    vectors = unit(6, 3)
    for d in range(2):
        doc, _ = docs.add_document(
            "",
            col.id,
            filename=f"{d}.txt",
            kind="text",
            sha256=f"{d:064d}",
            text="x",
            page_starts=[],
            metadata={},
        )
        chunks = [NewChunk(i, f"t{i}", 0, 1, None, vectors[d * 3 + i]) for i in range(3)]
        number = chunk_store.next_number(col.id)
        chunk_store.finish_document(doc.id, chunks, "m", [[1]] * 3, number)
    first = DocLibrary(chunk_store, tmp_path / "idx", None, 1)
    saved = first.index(col.id)
    assert first.index_path(col.id).exists()
    first.index_path(col.id).unlink()
    second = DocLibrary(chunk_store, tmp_path / "idx", None, 1)
    rebuilt = second.index(col.id)
    assert rebuilt.ids() == saved.ids() and len(rebuilt) == 6
    for chunk_id, vector in saved.vectors().items():
        np.testing.assert_array_equal(rebuilt.vectors()[chunk_id], vector)
    for q in unit(4, 9):
        assert rebuilt.search(q, 6) == saved.search(q, 6)
    third = DocLibrary(chunk_store, tmp_path / "idx", None, 1)  # the file written by the rebuild
    assert third.index(col.id).vectors().keys() == saved.vectors().keys()
    store.close()


def test_large_collections_search_approximately_and_stay_current():
    vectors = unit(300, 5)
    index = VectorIndex.build(DIM, list(range(300)), vectors)
    index.ann_min = 100  # HNSW from 100 vectors on (20,000 by default)
    exact = VectorIndex.build(DIM, list(range(300)), vectors)
    exact.ann_min = 10**9
    queries = unit(20, 6)
    agree = sum(index.search(q, 1) == exact.search(q, 1) for q in queries)
    assert agree >= 18  # HNSW's recall at this size is near 1
    index.add([1000], unit(1, 7))
    assert index.search(unit(1, 7)[0], 1)[0][0] == 1000
    index.remove([1000])
    assert 1000 not in {c for c, _ in index.search(unit(1, 7)[0], 5)}
    assert [c for c, _ in index.search(vectors[7], 3, allowed={7, 8})][0] == 7
