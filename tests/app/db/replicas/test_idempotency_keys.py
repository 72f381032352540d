"""IdempotencyKeys on SQLite and PostgreSQL: a key is claimed once, replayed once done, refused
with another body, held while its lease runs and taken over (with what was noted) after it,
kept apart per tenant and route, and pruned after the retention window."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import update

from app.db.models import utcnow
from app.db.replicas.idempotency_keys import IdempotencyKeys, KeyedRequest
from app.db.replicas.replica_models import IdempotencyKey
from app.db.store import Store

LEASE, DAY = 60.0, 86400.0  # the lease never runs out by itself during a test (`expire`)


def asked(key: str = "k1", body: str = "a" * 64, tenant: str = "", route: str = "POST /v1/x"):
    return KeyedRequest(tenant, route, key, body)


def expire(store: Store, record_id: int, **changes: object) -> None:
    """The holder died a while ago: its lease is in the past."""
    values = {"lease_until": utcnow() - timedelta(seconds=1), **changes}
    with store.transaction(write=True) as s:
        s.execute(update(IdempotencyKey).where(IdempotencyKey.id == record_id).values(**values))


def test_a_key_runs_once_and_its_response_is_replayed(store: Store):
    keys = IdempotencyKeys(store)
    first = keys.claim(asked(), "replica-1", LEASE, DAY)
    assert first.outcome == "new"
    assert keys.claim(asked(), "replica-2", LEASE, DAY).outcome == "busy"
    assert keys.finish(first.record_id, "replica-1", 201, "application/json", b'{"id": 1}')
    again = keys.claim(asked(), "replica-2", LEASE, DAY)
    assert (again.outcome, again.record_id) == ("replay", first.record_id)
    assert (again.status_code, again.content_type, again.response) == (
        201, "application/json", b'{"id": 1}',
    )  # fmt: skip
    assert keys.claim(asked(body="b" * 64), "replica-2", LEASE, DAY).outcome == "mismatch"


def test_keys_are_apart_per_tenant_and_route(store: Store):
    keys = IdempotencyKeys(store)
    claims = [
        keys.claim(asked(tenant=t, route=r), "replica-1", LEASE, DAY)
        for t, r in (("", "POST /v1/x"), ("t2", "POST /v1/x"), ("", "POST /v1/y"))
    ]
    assert [c.outcome for c in claims] == ["new"] * 3
    assert len({c.record_id for c in claims}) == 3


def test_a_dead_holders_key_is_taken_over_with_what_it_noted(store: Store):
    keys = IdempotencyKeys(store)
    first = keys.claim(asked(), "replica-1", LEASE, DAY)
    assert keys.note(first.record_id, "replica-1", {"from_seq": 4})
    expire(store, first.record_id)
    taken = keys.claim(asked(), "replica-2", LEASE, DAY)
    assert (taken.outcome, taken.stored) == ("resumed", {"from_seq": 4})
    # The first holder, had it lived, can no longer note, renew or finish it.
    assert not keys.note(first.record_id, "replica-1", {"from_seq": 5})
    assert not keys.renew(first.record_id, "replica-1", LEASE)
    assert not keys.finish(first.record_id, "replica-1", 200, None, b"")
    assert keys.renew(first.record_id, "replica-2", LEASE)
    assert keys.claim(asked(), "replica-3", LEASE, DAY).outcome == "busy"
    # Released (it failed): the next try takes it over at once.
    assert keys.release(first.record_id, "replica-2")
    assert keys.claim(asked(), "replica-3", LEASE, DAY).outcome == "resumed"


def test_a_key_past_the_retention_window_starts_afresh_and_is_pruned(store: Store):
    keys = IdempotencyKeys(store)
    old = keys.claim(asked("old"), "replica-1", LEASE, DAY)
    keys.finish(old.record_id, "replica-1", 200, None, b"old")
    kept = keys.claim(asked("kept"), "replica-1", LEASE, DAY)
    expire(store, old.record_id, created_at=utcnow() - timedelta(days=2))
    again = keys.claim(asked("old", body="c" * 64), "replica-1", LEASE, DAY)
    assert again.outcome == "new" and again.record_id != old.record_id
    expire(store, again.record_id, created_at=utcnow() - timedelta(days=2))
    assert keys.prune(DAY) == 1
    assert keys.claim(asked("kept"), "replica-2", LEASE, DAY).record_id == kept.record_id


def test_of_replicas_claiming_one_key_at_once_exactly_one_runs_it(store: Store):
    keys = IdempotencyKeys(store)
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def claim(i: int) -> None:
        start.wait()
        outcomes.append(keys.claim(asked(), f"replica-{i}", LEASE, DAY).outcome)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["busy", "busy", "busy", "new"]
