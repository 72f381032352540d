"""`Arrivals` on its own: tickets count until settled, once each, and settling wakes the engine."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from app.engine.core.arrivals import Arrivals


def test_a_ticket_pends_until_settled_and_settling_twice_counts_once():
    wakes = []
    arrivals = Arrivals(wake=lambda: wakes.append(1))
    a, b = arrivals.expect(), arrivals.expect()
    assert arrivals.pending == 2
    a.settle()
    a.settle()
    assert arrivals.pending == 1
    assert len(wakes) == 1  # the engine may be waiting for exactly this one
    b.settle()
    assert arrivals.pending == 0


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=60))
def test_pending_is_tickets_taken_minus_tickets_settled(ops: list[tuple[bool, int]]):
    arrivals = Arrivals()
    tickets = []
    settled: set[int] = set()
    for take, pick in ops:
        if take or not tickets:
            tickets.append(arrivals.expect())
        else:
            i = pick % len(tickets)
            tickets[i].settle()  # again: no change
            settled.add(i)
        assert arrivals.pending == len(tickets) - len(settled)


def test_tickets_taken_and_settled_from_many_threads_balance():
    arrivals = Arrivals()

    def churn() -> None:
        for _ in range(2000):
            arrivals.expect().settle()

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert arrivals.pending == 0
