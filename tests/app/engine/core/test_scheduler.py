"""Slot choice with conversation affinity (unit level: no model, slots' caches set by hand)."""

from __future__ import annotations

from app.engine.core.scheduler import Scheduler
from app.engine.llama.batch import Batch
from app.engine.request import GenerationRequest
from app.engine.task import Task
from mm.token_sequence import TokenSequence


def task(tokens: list[int], session: str | None = None) -> Task:
    return Task(GenerationRequest(TokenSequence(tokens), session=session), lambda e: None, True)


def admit(s: Scheduler, t: Task) -> int:
    slot = s.choose_slot(t)
    assert slot is not None
    s.bind(t, slot)
    slot.cache = TokenSequence(list(t.request.prompt.tokens))
    return slot.id


def finish(s: Scheduler, t: Task, when: float) -> None:
    slot = next(x for x in s.slots if x.task is t)
    s.release(t)
    slot.last_used = when


def test_a_session_goes_back_to_its_own_slot_even_when_another_holds_more_of_its_prompt():
    s = Scheduler(3, similarity=0.1)
    system = list(range(100, 140))
    a = task([*system, 1], "A")
    b = task([*system, 2], "B")
    slot_a, slot_b = admit(s, a), admit(s, b)
    finish(s, a, 1.0)
    finish(s, b, 2.0)
    s.slots[slot_a].cache.keep_first(5)  # A's slot kept only a little (e.g. cut by a retry)
    nxt = task([*system, 1, 7, 8], "A")
    # By prefix alone B's slot would win (40 shared tokens against 5); A keeps its own slot,
    # and B's conversation is not pushed out (A can copy the system prompt from it).
    plain = task([*system, 1, 7, 8])
    assert s.choose_slot(plain).id == slot_b
    assert s.choose_slot(nxt).id == slot_a


def test_a_session_whose_slot_is_busy_takes_a_free_slot_not_another_sessions():
    s = Scheduler(3, similarity=0.1)
    system = list(range(100, 140))
    a, b = task([*system, 1], "A"), task([*system, 2], "B")
    slot_a, slot_b = admit(s, a), admit(s, b)
    finish(s, b, 2.0)  # B's slot idle, holding B; A's slot busy; the third slot never used
    again = task([*system, 1, 5], "A")
    chosen = s.choose_slot(again)
    assert chosen is not None and chosen.id not in (slot_a, slot_b)


def test_when_every_idle_slot_holds_a_session_the_least_recently_used_is_given_away():
    s = Scheduler(2, similarity=0.1)
    a, b = task([1, 2, 3], "A"), task([4, 5, 6], "B")
    _, slot_b = admit(s, a), admit(s, b)
    finish(s, a, 5.0)
    finish(s, b, 3.0)  # B used less recently
    c = task([1, 2, 3, 9], "C")  # shares a prefix with A's slot, but A was used more recently
    assert s.choose_slot(c).id == slot_b


def test_a_busy_slot_is_never_taken():
    s = Scheduler(1, similarity=0.1)
    a = task([1, 2, 3], "A")
    admit(s, a)
    assert s.choose_slot(task([1, 2, 3, 4], "A")) is None
    assert s.choose_slot(task([7], "B")) is None


def test_only_the_newest_slot_of_a_session_is_its_own():
    s = Scheduler(2, similarity=0.1)
    a1 = task([1, 2], "A")
    first = admit(s, a1)
    a2 = task([1, 2, 3], "A")  # A's slot is busy: the second turn lands elsewhere
    second = admit(s, a2)
    assert first != second
    assert [x.session for x in s.slots].count("A") == 1
    assert s.slots[second].session == "A"


def test_background_work_waits_while_any_client_task_waits_or_runs():
    s = Scheduler(2, similarity=0.1)
    background = Task(
        GenerationRequest(TokenSequence([1, 2, 3]), background=True), lambda e: None, True
    )
    client = task([4, 5, 6])
    s.enqueue(background)
    s.enqueue(client)
    # Queued first, but the client goes first and the background task stays queued while
    # the client runs, although a slot is free.
    first = s.next_admission()
    assert first is not None and first[0] is client
    s.bind(client, first[1])
    assert s.next_admission() is None
    assert list(s.waiting) == [background]
    s.release(client)
    second = s.next_admission()
    assert second is not None and second[0] is background


def background_task(tokens: list[int]) -> Task:
    return Task(GenerationRequest(TokenSequence(tokens), background=True), lambda e: None, True)


def test_background_work_is_not_admitted_while_a_client_request_is_being_received():
    s = Scheduler(2, similarity=0.1)
    background = background_task([1, 2, 3])
    s.enqueue(background)
    assert s.next_admission(clients_arriving=True) is None  # its admission would delay it
    assert list(s.waiting) == [background]
    admitted = s.next_admission()
    assert admitted is not None and admitted[0] is background


def test_a_step_carries_background_work_only_when_no_client_waits_or_runs():
    s = Scheduler(2, similarity=0.1)
    batch = Batch(64)
    try:
        bg = background_task(list(range(100, 140)))
        s.enqueue(bg)
        first = s.next_admission()
        assert first is not None and first[0] is bg
        s.bind(bg, first[1])
        # Alone, the background task gets at most the budget the engine allows...
        planned = s.plan(batch, background=8)
        assert [(p.task, len(p.tokens)) for p in planned] == [(bg, 8)]
        assert s.plan(batch, background=0) == []  # ...and nothing when it allows none.
        # A client queued (not yet admitted) already holds background work back.
        client = task([1, 2, 3])
        s.enqueue(client)
        assert s.plan(batch, background=8) == []
        nxt = s.next_admission()
        assert nxt is not None and nxt[0] is client
        s.bind(client, nxt[1])
        # Admitting the client sent the background task back to the queue.
        assert list(s.waiting) == [bg] and s.active == [client]
        assert [p.task for p in s.plan(batch, background=8)] == [client]
        s.release(client)
        again = s.next_admission()
        assert again is not None and again[0] is bg
        s.bind(bg, again[1])
        assert [p.task for p in s.plan(batch, background=8)] == [bg]
    finally:
        batch.close()


def test_only_one_background_task_holds_a_slot():
    s = Scheduler(3, similarity=0.1)
    a, b = background_task([1, 2]), background_task([3, 4])
    s.enqueue(a)
    s.enqueue(b)
    first = s.next_admission()
    assert first is not None and first[0] is a
    s.bind(a, first[1])
    assert s.next_admission() is None
    assert list(s.waiting) == [b]


def test_a_client_in_the_queue_sends_the_background_task_back_and_may_take_its_slot():
    s = Scheduler(1, similarity=0.1)
    bg = background_task(list(range(100, 140)))
    s.enqueue(bg)
    slot = s.next_admission()[1]
    s.bind(bg, slot)
    bg.n_done = 16  # part of its prompt is in the slot's KV
    slot.cache = TokenSequence(list(range(100, 116)))
    client = task([1, 2, 3])
    s.enqueue(client)
    taken = s.next_admission()
    assert taken == (client, slot)
    # The background task waits at the front of the queue to start again; the slot still
    # holds what it computed until the client's admission decides what to keep.
    assert list(s.waiting) == [bg] and bg.n_done == 0 and bg.slot_id == -1
    assert bg not in s.active and slot.idle and len(slot.cache) == 16


def test_a_background_task_that_has_generated_is_not_preempted():
    s = Scheduler(1, similarity=0.1)
    bg = background_task([1, 2, 3])
    s.enqueue(bg)
    s.bind(bg, s.next_admission()[1])
    bg.n_generated = 1  # something was already handed to its sink
    s.enqueue(task([4, 5]))
    assert s.next_admission() is None and s.active == [bg]


def prefilling(s: Scheduler, n: int, length: int) -> list[Task]:
    """`n` client tasks admitted at once, each with `length` prompt tokens to prefill."""
    tasks = []
    for i in range(n):
        t = task([1000 * (i + 1) + j for j in range(length)])
        s.enqueue(t)
        nxt = s.next_admission()
        assert nxt is not None and nxt[0] is t
        s.bind(t, nxt[1])
        t.slot_id = nxt[1].id
        tasks.append(t)
    return tasks


def test_a_step_ends_where_a_prompt_ends_while_another_step_costs_less_than_the_wait():
    s = Scheduler(4, similarity=0.1)
    batch = Batch(512)
    try:
        a, b, c = prefilling(s, 3, 300)
        # The first prompt ends in the step: the others' 212 tokens would delay its first
        # token by far more than one more step costs them (a CPU's prior), so the step ends.
        planned = s.plan(batch)
        assert [(p.task, p.n_prompt, p.row is not None) for p in planned] == [(a, 300, True)]
        s.commit(planned)
        a.next_token = 7  # sampled
        planned = s.plan(batch)
        # Then a decode token first, and the next prompt, which ends there too.
        assert [(p.task, p.n_prompt) for p in planned] == [(a, 0), (b, 300)]
        # Where one more step costs more than the wait (a GPU's ratio), the batch is filled.
        s.step_cost.observe(1, 0.008)
        s.step_cost.observe(512, 0.009)
        planned = s.plan(batch)
        assert [(p.task, p.n_prompt) for p in planned] == [(a, 0), (b, 300), (c, 211)]
    finally:
        batch.close()
