"""DocLibrary as a cache of the database: two libraries on one database (two replicas, each with
its own index directory) see each other's documents once ready, and never a deleted one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.chunk_writes import BackendMismatch
from app.db.documents.document_records import NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from app.docs.library import DocLibrary
from app.engine.request import RequestError
from tests.db_urls import BACKENDS, migrated_store


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path):
    with migrated_store(request.param, tmp_path) as s:
        yield s


def ready_document(docs: DocumentStore, chunk_store: ChunkStore, col: str, name: str) -> list[int]:
    """A document made ready (as a worker on some replica would); its chunk ids."""
    record, _ = docs.add_document(
        "",
        col,
        filename=name,
        kind="text",
        sha256=name.encode().hex().ljust(64, "0")[:64],
        text=name,
        page_starts=[],
        metadata={},
    )
    vecs = np.eye(4, dtype=np.float32)[:2]
    new = [NewChunk(i, f"{name} {i}", i, i + 1, None, vecs[i]) for i in range(2)]
    first = chunk_store.next_number(col)
    assert chunk_store.finish_document(record.id, new, "m", [[1], [2]], first)
    return [chunk_id for chunk_id, _ in chunk_store.numbered(record.id)]


def test_a_replicas_index_follows_what_other_replicas_store_and_delete(
    store: Store, tmp_path: Path
):
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 8, None).id
    here = DocLibrary(chunk_store, tmp_path / "a", None, 1)
    there = DocLibrary(chunk_store, tmp_path / "b", None, 1)
    assert len(there.index(col)) == 0  # loaded (and cached) before anything was stored
    first = ready_document(docs, chunk_store, col, "one")
    here.added(col, first, np.eye(4, dtype=np.float32)[:2])
    assert there.index(col).ids() == set(first)  # made ready elsewhere: synced before use
    second = ready_document(docs, chunk_store, col, "two")
    assert there.index(col).ids() == set(first) | set(second)
    assert here.index(col).ids() == set(first) | set(second)
    [doc] = [d.id for d in docs.list_documents("", col) if d.filename == "one"]
    docs.delete_document("", doc)
    assert there.index(col).ids() == set(second)  # deleted elsewhere: never found again
    hits = there.index(col).search(np.eye(4, dtype=np.float32)[0], 10)
    assert {chunk_id for chunk_id, _ in hits} <= set(second)
    # The saved file is the synced index: a restart of that replica loads it as it is.
    again = DocLibrary(chunk_store, tmp_path / "b", None, 1)
    assert again.index(col).ids() == set(second)


class CountingStore(ChunkStore):
    """A ChunkStore that counts full reads of a collection's vectors (what a rebuild does)."""

    full_reads = 0

    def vectors(self, collection_id: str, dim: int):  # noqa: ANN201
        CountingStore.full_reads += 1
        return super().vectors(collection_id, dim)


def test_a_restart_reads_the_index_file_and_syncs_what_it_lacks_without_a_rebuild(
    store: Store, tmp_path: Path
):
    docs, chunk_store = DocumentStore(store), CountingStore(store)
    col = docs.create_collection("", "c", 64, 8, None).id
    before = DocLibrary(chunk_store, tmp_path / "idx", None, 1)
    first = ready_document(docs, chunk_store, col, "one")
    before.added(col, first, np.eye(4, dtype=np.float32)[:2])
    before.flush()  # what a clean shutdown does
    # Made ready after the file was written (a crash before the next write, or another
    # replica): the next start adds it from the database.
    second = ready_document(docs, chunk_store, col, "two")
    CountingStore.full_reads = 0
    after = DocLibrary(chunk_store, tmp_path / "idx", None, 1)
    after.load_all()
    assert after.index(col).ids() == set(first) | set(second)
    assert CountingStore.full_reads == 0  # no rebuild from every stored vector
    after.index_path(col).write_bytes(b"damaged")
    again = DocLibrary(chunk_store, tmp_path / "idx", None, 1)
    assert again.index(col).ids() == set(first) | set(second)
    assert CountingStore.full_reads == 1  # a damaged file is rebuilt from the database


def test_a_collection_refuses_another_embedding_backend(store: Store, tmp_path: Path):
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 8, None).id
    assert chunk_store.backend_of(col) is None
    record, _ = docs.add_document(
        "", col, filename="a", kind="text", sha256="a" * 64, text="a", page_starts=[], metadata={}
    )
    new = [NewChunk(0, "a", 0, 1, None, np.eye(4, dtype=np.float32)[0])]
    assert chunk_store.finish_document(record.id, new, "m", [[1]], 1, backend="torch")
    assert chunk_store.backend_of(col) == "torch"
    DocLibrary(chunk_store, tmp_path / "t", None, 1, "torch").check_backend(col)
    onnx = DocLibrary(chunk_store, tmp_path / "o", None, 1, "onnx-int8")
    with pytest.raises(RequestError) as refused:
        onnx.check_backend(col)
    assert refused.value.status == 409 and refused.value.code == "embedding_backend_mismatch"
    assert "'torch'" in refused.value.message and "--embedding-backend" in refused.value.message
    other, _ = docs.add_document(
        "", col, filename="b", kind="text", sha256="b" * 64, text="b", page_starts=[], metadata={}
    )
    with pytest.raises(BackendMismatch):  # a worker of the other backend stores nothing
        chunk_store.finish_document(other.id, new, "m", [[1]], 2, backend="onnx-int8")
    assert [c.ordinal for c in docs.chunks("", other.id)] == []
