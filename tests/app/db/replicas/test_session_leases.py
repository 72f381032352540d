"""SessionLeases on SQLite and PostgreSQL: one turn of a session at a time, whoever asks; the
turn let go or run out is the next one's; the turns are counted, and a take that expects
another count is refused; two replicas taking at once get one turn between them."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import update

from app.db.models import utcnow
from app.db.replicas.replica_models import SessionTurn
from app.db.replicas.session_leases import Changed, Held, SessionLeases, TurnLease
from app.db.store import Store

LEASE = 60.0  # never runs out by itself during a test (`expire`)


def expire(store: Store, session_id: str) -> None:
    """The holder died a while ago: its lease is in the past."""
    past = utcnow() - timedelta(seconds=1)
    with store.transaction(write=True) as s:
        query = update(SessionTurn).where(SessionTurn.session_id == session_id)
        s.execute(query.values(lease_until=past))


def test_one_turn_at_a_time_and_each_counted(store: Store):
    leases, sid = SessionLeases(store), store.create_session().id
    store.add_message(sid, "user", "earlier")
    first = leases.take(sid, "r1/a", LEASE)
    assert first == TurnLease(turn=1, next_seq=1)
    held = leases.take(sid, "r2/b", LEASE)
    assert isinstance(held, Held) and 0 < held.remaining_s <= LEASE
    assert leases.held(sid)
    assert leases.renew(sid, "r1/a", LEASE) and not leases.renew(sid, "r2/b", LEASE)
    assert leases.release(sid, "r1/a") and not leases.held(sid)
    assert leases.take(sid, "r2/b", LEASE) == TurnLease(turn=2, next_seq=1)


def test_a_lease_run_out_is_the_next_turns(store: Store):
    leases, sid = SessionLeases(store), store.create_session().id
    assert isinstance(leases.take(sid, "dead/a", LEASE), TurnLease)
    expire(store, sid)
    assert not leases.held(sid)
    assert leases.take(sid, "r2/b", LEASE) == TurnLease(turn=2, next_seq=0)
    assert not leases.renew(sid, "dead/a", LEASE)  # the dead one's is gone


def test_a_take_that_expects_another_count_is_refused(store: Store):
    leases, sid = SessionLeases(store), store.create_session().id
    assert leases.take(sid, "r1/a", LEASE, expect=0) == TurnLease(turn=1, next_seq=0)
    leases.release(sid, "r1/a")
    leases.take(sid, "r1/b", LEASE)
    leases.release(sid, "r1/b")
    assert leases.take(sid, "r1/c", LEASE, expect=1) == Changed(turns=2)
    assert not leases.held(sid)  # a refused take holds nothing
    assert leases.take(sid, "r1/c", LEASE, expect=2) == TurnLease(turn=3, next_seq=0)


def test_no_session_no_turn(store: Store):
    with pytest.raises(KeyError):
        SessionLeases(store).take("missing", "r1/a", LEASE)


def test_the_lease_goes_with_its_session(store: Store):
    leases, sid = SessionLeases(store), store.create_session().id
    leases.take(sid, "r1/a", LEASE)
    assert store.delete_session(sid)
    assert not leases.held(sid) and not leases.release(sid, "r1/a")


def test_two_replicas_taking_at_once_get_one_turn(store: Store):
    leases, sid = SessionLeases(store), store.create_session().id
    got: list[object] = []
    start = threading.Barrier(4)

    def take(holder: str) -> None:
        start.wait()
        got.append(leases.take(sid, holder, LEASE))

    threads = [threading.Thread(target=take, args=(f"r{i}/x",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(g, TurnLease) for g in got) == 1
    assert sum(isinstance(g, Held) for g in got) == 3
