"""`IngestClaims`: which worker ingests a document, claimed in the database with a lease.

Several replicas share one database; each has one ingestion worker. A worker claims the oldest
unfinished document nobody holds (`claimed_by`, `lease_until` on its row) and renews the lease
while it works on it; a document whose lease ran out (its worker died) is free to claim again.
On PostgreSQL the claim reads with `FOR UPDATE SKIP LOCKED`: two workers claiming at once never
take the same row and never wait for each other. On SQLite every write transaction is serialised
(BEGIN IMMEDIATE), which gives the same guarantee.

A worker's id names its replica (app/docs/background/ingest_lease.py): a replica restarted on the
same data directory takes back its own documents at once instead of waiting for their leases to run
out, as a single server did before leases.

Where servers of several models share the database (router mode: --docs-own-model), a worker
claims only the documents of its own model's collections (`model`): chunking, chunk token ids and
the prefill that follows are in that model's tokens, and another model's server must not do
them. Without `model` every document is claimed, as on servers of one model.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import or_, select, update

from app.db.documents.document_models import Collection, Document
from app.db.models import utcnow
from app.db.store import Store

UNFINISHED = ("queued", "processing")


class IngestClaims:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    def claim_next(self, worker: str, lease_s: float, model: str | None = None) -> str | None:
        """Claim the oldest unfinished document that is free (never claimed, lease expired, or
        already this worker's) for lease_s seconds; its id, or None if there is none. `model`:
        only of collections of that model."""
        return self._claim(worker, lease_s, None, model)

    def claim(self, document_id: str, worker: str, lease_s: float) -> bool:
        """Claim this document if it is unfinished and free (as `claim_next`)."""
        return self._claim(worker, lease_s, document_id, None) is not None

    def _claim(
        self, worker: str, lease_s: float, document_id: str | None, model: str | None
    ) -> str | None:
        now = utcnow()
        free = or_(
            Document.lease_until.is_(None),
            Document.lease_until < now,
            Document.claimed_by == worker,
        )
        query = (
            select(Document)
            .where(Document.status.in_(UNFINISHED), free)
            .order_by(Document.created_at, Document.id)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        if document_id is not None:
            query = query.where(Document.id == document_id)
        if model is not None:
            # A subquery, not a join: FOR UPDATE then locks the document's row alone.
            own = select(Collection.id).where(Collection.model == model)
            query = query.where(Document.collection_id.in_(own))
        with self._tx(write=True) as s:
            d = s.scalar(query)
            if d is None:
                return None
            d.claimed_by, d.lease_until = worker, now + timedelta(seconds=lease_s)
            return d.id

    def renew(self, document_id: str, worker: str, lease_s: float) -> bool:
        """Extend the worker's lease; False if it no longer holds the document (taken over
        after its lease ran out, finished, or deleted)."""
        query = (
            update(Document)
            .where(
                Document.id == document_id,
                Document.claimed_by == worker,
                Document.status.in_(UNFINISHED),
            )
            .values(lease_until=utcnow() + timedelta(seconds=lease_s))
        )
        with self._tx(write=True) as s:
            return s.execute(query).rowcount == 1

    def holder(self, document_id: str) -> tuple[str | None, bool]:
        """(the worker that claimed it, whether its lease is still running); for tests and
        logs."""
        with self._tx() as s:
            d = s.get(Document, document_id)
            if d is None or d.claimed_by is None or d.lease_until is None:
                return None, False
            return d.claimed_by, d.lease_until > utcnow()
