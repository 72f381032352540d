"""A collection's version: bumped in every transaction that changes its chunks or their vectors.

Each replica keeps its own search index of a collection (app/docs/library.py), synced from the
database at some version; before a search it compares that with the stored version, and a
replica whose index is older syncs it first. So a document made ready on one replica is found
by every other, and a deleted one is served by none. Bumping the version locks the collection's
row (PostgreSQL): writers take that lock before any document's, so they cannot deadlock.
"""

from __future__ import annotations

from sqlalchemy import Update, select, update
from sqlalchemy.orm import Session

from app.db.documents.document_models import Collection


def bump_version_of(collection_id: str) -> Update:
    """The statement that moves the collection's version on (its rowcount: 0 if it is gone)."""
    return (
        update(Collection)
        .where(Collection.id == collection_id)
        .values(version=Collection.version + 1)
    )


def bump_version(s: Session, collection_id: str) -> None:
    s.execute(bump_version_of(collection_id))


def version_of(s: Session, collection_id: str) -> int | None:
    """None if the collection does not exist."""
    return s.scalar(select(Collection.version).where(Collection.id == collection_id))
