"""DeletionLog on SQLite and PostgreSQL: every delete is logged in its transaction, in order,
rows every live replica has applied are pruned, and collection versions move with the chunks a
collection has."""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_records import NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.models import utcnow
from app.db.replicas.deletion_log import DeletionLog
from app.db.replicas.replica_models import ReplicaProgress
from app.db.store import Store


def add(docs: DocumentStore, collection_id: str, name: str) -> str:
    record, _ = docs.add_document(
        "",
        collection_id,
        filename=name,
        kind="text",
        sha256=name.encode().hex().ljust(64, "0")[:64],
        text=name,
        page_starts=[],
        metadata={},
    )
    return record.id


def test_deletes_are_logged_in_order_and_read_after_a_cursor(store: Store):
    docs, log = DocumentStore(store), DeletionLog(store)
    col = docs.create_collection("", "c", 64, 8, None).id
    other = docs.create_collection("", "d", 64, 8, None).id
    a, b, c = add(docs, col, "a"), add(docs, col, "b"), add(docs, other, "c")
    assert log.after(0) == []
    assert docs.delete_document("", a) is not None
    assert docs.delete_document("someone-else", b) is None  # not found: nothing logged
    assert docs.delete_collection("", other) == [c]
    rows = log.after(0)
    assert [d for _, d in rows] == [a, c]
    assert rows[0][0] < rows[1][0]
    assert log.after(rows[0][0]) == rows[1:]
    assert log.after(rows[-1][0]) == []
    assert docs.delete_collection("", col) == [b]
    assert [d for _, d in log.after(rows[-1][0])] == [b]


def test_a_collections_version_moves_when_a_document_becomes_ready_or_is_deleted(store: Store):
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 8, None).id
    start = chunk_store.version(col)
    doc = add(docs, col, "a")
    assert chunk_store.version(col) == start  # queued: no chunk changed
    vec = np.ones(4, dtype=np.float32)
    assert chunk_store.finish_document(doc, [NewChunk(0, "x", 0, 1, None, vec)], "m", [[1]], 1)
    ready = chunk_store.version(col)
    assert ready > start
    ids = chunk_store.ready_chunk_ids(col)
    assert len(ids) == 1 and chunk_store.vectors_of(sorted(ids))[0] == sorted(ids)
    docs.delete_document("", doc)
    assert chunk_store.version(col) > ready
    assert chunk_store.ready_chunk_ids(col) == set()
    docs.delete_collection("", col)
    assert chunk_store.version(col) is None


def seen_long_ago(store: Store, replica: str, days: float) -> None:
    with store.transaction(write=True) as s:
        row = s.get(ReplicaProgress, replica)
        row.seen_at = utcnow() - timedelta(days=days)


def test_rows_every_live_replica_applied_are_pruned_and_a_long_gone_one_holds_none_back(
    store: Store,
):
    docs, log = DocumentStore(store), DeletionLog(store)
    col = docs.create_collection("", "c", 64, 8, None).id
    for name in ("a", "b", "c"):
        docs.delete_document("", add(docs, col, name))
    ids = [i for i, _ in log.after(0)]
    assert log.prune(3600.0) == 0  # no replica has said how far it got: nothing goes
    log.report("replica-1", ids[2])
    log.report("replica-2", ids[0])
    assert log.prune(3600.0) == 1  # the first row: applied by both
    assert [i for i, _ in log.after(0)] == ids[1:]
    log.report("replica-2", ids[1])
    assert log.prune(3600.0) == 1
    assert [i for i, _ in log.after(0)] == ids[2:]
    # replica-2 stops; the window passes: it no longer holds the last row back.
    seen_long_ago(store, "replica-2", days=8)
    assert log.prune(7 * 86400.0) == 1
    assert log.after(0) == []
    # Ids keep growing after a prune: a cursor never sees an old id again.
    docs.delete_document("", add(docs, col, "d"))
    assert [i for i, _ in log.after(0)][0] > ids[2]
