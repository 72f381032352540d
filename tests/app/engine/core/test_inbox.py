"""`Inbox`: puts from any thread, one take by the engine thread, and refusal once closed."""

from __future__ import annotations

import threading

import pytest

from app.engine.core.arrivals import Arrivals
from app.engine.core.inbox import Inbox
from app.engine.request import RequestError
from app.engine.task import Task


def task() -> Task:
    return object.__new__(Task)  # identity is all the inbox looks at


def test_tasks_and_calls_come_out_in_order_once_and_each_put_wakes_the_engine():
    woken = []
    inbox = Inbox(lambda: woken.append(1))
    a, b = task(), task()
    inbox.put_task(a)
    future = inbox.put_call(lambda: 42)
    inbox.put_task(b)
    assert len(inbox) == 2 and len(woken) == 3
    tasks, calls = inbox.take()
    assert tasks == [a, b] and [c.fn() for c in calls] == [42] and calls[0].future is future
    assert calls[0].needs_model  # a call may touch the model unless it says otherwise
    inbox.put_call(lambda: 0, needs_model=False)
    assert inbox.take()[1][0].needs_model is False
    assert inbox.take() == ([], []) and len(inbox) == 0


def test_a_refused_task_puts_nothing_and_leaves_its_arrival_pending():
    inbox, arrivals = Inbox(lambda: None), Arrivals()
    arrival = arrivals.expect()

    def full(tasks: list[Task]) -> None:
        raise RequestError("busy", code="unavailable", status=503)

    with pytest.raises(RequestError):
        inbox.put_task(task(), full, arrival)
    assert len(inbox) == 0 and arrivals.pending == 1
    inbox.put_task(task(), lambda tasks: None, arrival)
    assert len(inbox) == 1 and arrivals.pending == 0  # settled as it went in


def test_once_closed_puts_are_refused_and_what_was_in_stays_for_the_last_take():
    inbox = Inbox(lambda: None)
    kept = task()
    inbox.put_task(kept)
    inbox.close()
    with pytest.raises(RequestError) as refused:
        inbox.put_task(task())
    assert refused.value.status == 503
    with pytest.raises(RequestError):
        inbox.check(lambda tasks: None)
    with pytest.raises(RequestError):
        inbox.put_call(lambda: None).result(timeout=1)
    assert inbox.take() == ([kept], [])


def test_puts_from_many_threads_are_all_taken():
    inbox = Inbox(lambda: None)
    per_thread = 200

    def put() -> None:
        for _ in range(per_thread):
            inbox.put_task(task())

    threads = [threading.Thread(target=put) for _ in range(4)]
    taken: list[Task] = []
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads) or len(inbox):
        taken += inbox.take()[0]
    assert len(taken) == 4 * per_thread and len({id(t) for t in taken}) == len(taken)
