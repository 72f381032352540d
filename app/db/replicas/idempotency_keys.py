"""`IdempotencyKeys`: the writes sent with an `Idempotency-Key`, shared by every replica.

A request is claimed under (tenant, method and path, key) with the sha256 of its body. The
replica that runs it holds a lease it renews while it runs; when it ends with a success, the
response is kept and replayed to any retry with the same body. A replica that dies (kill -9) stops
renewing: once the lease has run out, a retry takes the request over, with what the first try
noted before it stored anything (`stored`), so it can continue the work instead of doing it
twice. Records older than the retention window are pruned.

The unique (tenant, route, key) makes a claim atomic on both backends: of two replicas inserting
at once one wins, the other reads the winner's row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import utcnow
from app.db.replicas.replica_models import DONE, IN_PROGRESS, IdempotencyKey
from app.db.store import Store

# new: run it; resumed: run it, a dead replica's try taken over; replay: send `response`;
# mismatch: the key was used with another body; busy: another replica runs it now.
Outcome = Literal["new", "resumed", "replay", "mismatch", "busy"]


@dataclass(slots=True)
class Claim:
    outcome: Outcome
    record_id: int
    stored: dict[str, Any]  # what an earlier try noted (resumed)
    status_code: int | None = None  # the response to replay
    content_type: str | None = None
    response: bytes | None = None


@dataclass(slots=True)
class KeyedRequest:
    tenant_id: str
    route: str  # "POST /v1/media"
    key: str
    body_sha256: str


class IdempotencyKeys:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    def claim(
        self, request: KeyedRequest, holder: str, lease_s: float, retention_s: float
    ) -> Claim:
        """Claim the request for `holder`, or say why not (see `Outcome`)."""
        try:
            return self._claim(request, holder, lease_s, retention_s)
        except IntegrityError:  # another replica inserted it first: read theirs
            return self._claim(request, holder, lease_s, retention_s)

    def _claim(
        self, request: KeyedRequest, holder: str, lease_s: float, retention_s: float
    ) -> Claim:
        now = utcnow()
        lease = now + timedelta(seconds=lease_s)
        with self._tx(write=True) as s:
            row = _find(s, request)
            if row is not None and row.created_at < now - timedelta(seconds=retention_s):
                s.delete(row)  # expired: the key starts afresh
                s.flush()
                row = None
            if row is None:
                row = IdempotencyKey(
                    tenant_id=request.tenant_id,
                    route=request.route,
                    key=request.key,
                    body_sha256=request.body_sha256,
                    state=IN_PROGRESS,
                    holder=holder,
                    lease_until=lease,
                    created_at=now,
                )
                s.add(row)
                s.flush()
                return Claim("new", row.id, {})
            stored = dict(row.stored or {})
            if row.body_sha256 != request.body_sha256:
                return Claim("mismatch", row.id, stored)
            if row.state == DONE:
                sent = (row.status_code, row.content_type, row.response)
                return Claim("replay", row.id, stored, *sent)
            if row.lease_until is not None and row.lease_until > now:
                return Claim("busy", row.id, stored)
            row.holder, row.lease_until = holder, lease
            return Claim("resumed", row.id, stored)

    def renew(self, record_id: int, holder: str, lease_s: float) -> bool:
        """Extend the lease; False if the record is no longer this holder's."""
        lease = utcnow() + timedelta(seconds=lease_s)
        return self._update(record_id, holder, lease_until=lease)

    def note(self, record_id: int, holder: str, stored: dict[str, Any]) -> bool:
        """Say what the request is about to store, before it stores it (merged into `stored`)."""
        with self._tx(write=True) as s:
            row = s.get(IdempotencyKey, record_id, with_for_update=True)
            if row is None or row.holder != holder or row.state != IN_PROGRESS:
                return False
            row.stored = {**(row.stored or {}), **stored}
            return True

    def finish(
        self, record_id: int, holder: str, status_code: int, content_type: str | None, body: bytes
    ) -> bool:
        """The request succeeded: keep its response for retries."""
        return self._update(
            record_id,
            holder,
            state=DONE,
            lease_until=None,
            status_code=status_code,
            content_type=content_type,
            response=body,
        )

    def release(self, record_id: int, holder: str) -> bool:
        """The request failed or was cut short: a retry may take it over at once."""
        return self._update(record_id, holder, lease_until=utcnow())

    def prune(self, retention_s: float) -> int:
        """Delete the records older than the retention window; how many."""
        cutoff = utcnow() - timedelta(seconds=retention_s)
        expired = delete(IdempotencyKey).where(IdempotencyKey.created_at < cutoff)
        with self._tx(write=True) as s:
            return s.execute(expired).rowcount

    def _update(self, record_id: int, holder: str, **values: Any) -> bool:
        query = (
            update(IdempotencyKey)
            .where(
                IdempotencyKey.id == record_id,
                IdempotencyKey.holder == holder,
                IdempotencyKey.state == IN_PROGRESS,
            )
            .values(**values)
        )
        with self._tx(write=True) as s:
            return s.execute(query).rowcount == 1


def _find(s: Session, request: KeyedRequest) -> IdempotencyKey | None:
    query = select(IdempotencyKey).where(
        IdempotencyKey.tenant_id == request.tenant_id,
        IdempotencyKey.route == request.route,
        IdempotencyKey.key == request.key,
    )
    return s.scalar(query.with_for_update())
