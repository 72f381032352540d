"""`DeletionLog`: the documents deleted anywhere, in order, for every replica to read.

A replica that deletes a document drops its KV from its own cache tiers at once; the others
learn of it here (app/docs/deletion_watch.py) and drop theirs. Rows are written in the deleting
transaction, so a replica never sees a document gone without its log row. A reader keeps the
largest id it has handled and asks for the ones after it: on PostgreSQL, writers take a table
lock first, so ids are committed in the order they were given out and a reader that has seen id
n can never see a smaller id commit later (SQLite serialises every writer anyway).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.db.document_models import DocumentDeletion
from app.db.models import utcnow
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
        self._tx = store._tx  # noqa: SLF001 (one engine, one transaction discipline)

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
