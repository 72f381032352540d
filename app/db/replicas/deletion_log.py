"""`DeletionLog`: the documents deleted anywhere, in order, for every replica to read.

A replica that deletes a document drops its KV from its own cache tiers at once; the others
learn of it here (app/docs/background/deletion_watch.py) and drop theirs. Rows are written in the
deleting transaction, so a replica never sees a document gone without its log row. A reader keeps
the largest id it has handled and asks for the ones after it: on PostgreSQL, writers take a table
lock first, so ids are committed in the order they were given out and a reader that has seen id
n can never see a smaller id commit later (SQLite serialises every writer anyway).

Each replica reports how far it has applied the log (`report`: its cursor, and when); rows at or
below the smallest cursor of the replicas seen within a window are pruned: every replica still
running has applied them. A replica not seen for longer (gone for good, or down that long) stops
holding pruning back; when it comes back it reads what is left.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from app.db.documents.document_models import DocumentDeletion
from app.db.models import utcnow
from app.db.replicas.replica_models import ReplicaProgress
from app.db.store import Store


def lock_log(s: Session) -> None:
    """Take the writers' lock on the log; first thing in a deleting transaction (before any
    row lock, so writers cannot deadlock on it). Readers are not blocked."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text("LOCK TABLE document_deletions IN SHARE ROW EXCLUSIVE MODE"))


def log_deletions(s: Session, document_ids: Iterable[str]) -> None:
    """Log these documents as deleted (in the deleting transaction, after `lock_log`)."""
    now = utcnow()
    s.add_all(DocumentDeletion(document_id=d, deleted_at=now) for d in document_ids)


class DeletionLog:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    def after(self, cursor: int, limit: int = 1000) -> list[tuple[int, str]]:
        """(id, document id) of the deletions logged after id `cursor`, oldest first."""
        query = (
            select(DocumentDeletion.id, DocumentDeletion.document_id)
            .where(DocumentDeletion.id > cursor)
            .order_by(DocumentDeletion.id)
            .limit(limit)
        )
        with self._tx() as s:
            return [(i, d) for i, d in s.execute(query).all()]

    def report(self, replica: str, cursor: int) -> None:
        """This replica has applied the log up to id `cursor` (and is alive now)."""
        with self._tx(write=True) as s:
            row = s.get(ReplicaProgress, replica, with_for_update=True)
            if row is None:
                s.add(ReplicaProgress(replica=replica, deletion_cursor=cursor, seen_at=utcnow()))
            else:
                row.deletion_cursor, row.seen_at = cursor, utcnow()

    def prune(self, window_s: float) -> int:
        """Delete the rows every replica seen within `window_s` has applied; how many."""
        seen = ReplicaProgress.seen_at >= utcnow() - timedelta(seconds=window_s)
        with self._tx(write=True) as s:
            applied = s.scalar(select(func.min(ReplicaProgress.deletion_cursor)).where(seen))
            if applied is None:
                return 0
            done = delete(DocumentDeletion).where(DocumentDeletion.id <= applied)
            return s.execute(done).rowcount
