"""What replicas on one database share besides sessions and documents: the idempotency keys of
writes (app/db/replicas/idempotency_keys.py), whose turn each session is in
(app/db/replicas/session_leases.py) and how far each replica has applied the deletion log
(app/db/replicas/deletion_log.py), declared on the same `Base` as every other table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models import Base, Json, UTCDateTime, utcnow

IN_PROGRESS, DONE = "in_progress", "done"


class IdempotencyKey(Base):
    """A write sent with an `Idempotency-Key`: claimed by the replica that runs it (a lease it
    renews while it runs), then the response it gave, replayed to a retry of the same request."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("tenant_id", "route", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(64))
    route: Mapped[str] = mapped_column(String(512))  # method and path
    key: Mapped[str] = mapped_column(String(255))
    body_sha256: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))  # IN_PROGRESS | DONE
    holder: Mapped[str | None] = mapped_column(String(128))  # the replica running it
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # What the request noted before it stored anything (a retry taking over reads it).
    stored: Mapped[dict[str, Any] | None] = mapped_column(Json)
    status_code: Mapped[int | None] = mapped_column(Integer)
    content_type: Mapped[str | None] = mapped_column(String(255))
    response: Mapped[bytes | None] = mapped_column(LargeBinary)
    # Indexed: records past the retention window are pruned by it.
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class SessionTurn(Base):
    """A session's turn: the request that runs one now (a lease it renews while it runs), and
    how many turns the session has had (a retry compares it with the count its first try saw)."""

    __tablename__ = "session_turns"

    session_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    holder: Mapped[str | None] = mapped_column(String(128))  # replica and request; None: free
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    turns: Mapped[int] = mapped_column(Integer, default=0)  # taken so far, the running one too


class ReplicaProgress(Base):
    """How far a replica has applied the deletion log, and when it last said so: rows every
    live replica has applied are pruned."""

    __tablename__ = "replica_progress"

    replica: Mapped[str] = mapped_column(String(128), primary_key=True)
    deletion_cursor: Mapped[int] = mapped_column(Integer)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
