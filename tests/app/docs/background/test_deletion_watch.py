"""DeletionWatch: the documents deleted on any replica (the deletion log) leave this replica's
caches, each batch once, from the log's start; the rows it applied are pruned."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.db.documents.document_store import DocumentStore
from app.db.replicas.deletion_log import DeletionLog
from app.db.store import Store
from app.docs.background.deletion_watch import DeletionWatch
from tests.eventually import eventually_async


def test_each_deleted_document_is_forgotten_once_in_log_order(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path}/t.db")
    store.migrate()
    docs = DocumentStore(store)
    col = docs.create_collection("", "c", 64, 8, None).id

    def add(name: str) -> str:
        record, _ = docs.add_document(
            "", col, filename=name, kind="text", sha256=name * 64, text=name,
            page_starts=[], metadata={},
        )  # fmt: skip
        return record.id

    forgotten: list[set[str]] = []

    async def forget(ids: set[str]) -> None:
        forgotten.append(ids)

    async def run() -> None:
        a, b, c = add("a"), add("b"), add("c")
        docs.delete_document("", a)  # before the replica started: still forgotten
        deletions = DeletionLog(store)
        watch = DeletionWatch(deletions, forget, "replica-1", 3600.0)
        assert await watch.check()
        assert forgotten == [{a}]
        # The only replica has applied it: the log row is pruned, and the cursor stays.
        assert deletions.after(0) == []
        assert not await watch.check()  # nothing new: nothing forgotten again
        docs.delete_document("", b)
        assert await watch.check()
        assert forgotten == [{a}, {b}]
        # Started on the event loop, it finds the next delete by itself.
        watch.poll_s = 0.01
        watch.start()
        docs.delete_collection("", col)
        await eventually_async(lambda: len(forgotten) >= 3, "the watch to find the third delete")
        watch.stop()
        assert forgotten == [{a}, {b}, {c}]

    try:
        asyncio.run(run())
    finally:
        store.close()
