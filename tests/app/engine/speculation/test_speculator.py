"""Speculator with small fake tasks: draft sources, the step budget, the length that pays."""

from __future__ import annotations

import math

from app.engine.request import GenerationRequest
from app.engine.speculation.draft_cost import DraftCost
from app.engine.speculation.reply_memory import ReplyMemory
from app.engine.speculation.speculator import Speculator, worth_drafting
from app.engine.task import Task
from mm.token_sequence import TokenSequence

QUOTE = list(range(100, 140))


def task_of(
    prompt: list[int], generated: list[int], documents: frozenset[str] = frozenset()
) -> Task:
    task = Task(GenerationRequest(TokenSequence(prompt), documents=documents), lambda e: None, True)
    task.generated = list(generated)
    return task


def cheap() -> DraftCost:
    """A draft token that costs a tenth of a generated token (a GPU's kind of figure)."""
    return DraftCost(fixed=0.1)


def speculator(spec_type: str = "ngram-simple", n_max: int = 16, cost: DraftCost | None = None):
    return Speculator(spec_type, 3, n_max, 0, ReplyMemory(3), cost or cheap())


def test_a_draft_is_as_long_as_each_token_pays():
    assert worth_drafting(0.9, 0.5) == 4  # 0.9^4 = 0.66 > 0.5 + 0.1 (the margin) >= 0.9^5
    assert worth_drafting(0.5, 0.5) == 0
    assert worth_drafting(0.99, 0.1, most=16) == 16
    # A busy batch, where a draft token costs nearly what it saves: a long match at its prior
    # chance drafts nothing (without the margin, 2 tokens whose gain the estimates' error eats).
    assert worth_drafting(0.95, 0.87) == 0


def test_drafts_a_quote_of_the_prompt():
    task = task_of([1, 2, *QUOTE], QUOTE[:3])
    (draft,) = speculator().drafts([(task, 99)])
    assert draft == QUOTE[3 : 3 + len(draft)] and len(draft) >= 5


def test_the_step_budget_is_shared_and_room_is_kept():
    a, b = task_of(QUOTE, QUOTE[:3]), task_of(QUOTE, QUOTE[:3])
    first, second = speculator(n_max=8).drafts([(a, 99), (b, 99)])
    assert len(first) + len(second) == 8
    (short,) = speculator().drafts([(task_of(QUOTE, QUOTE[:3]), 3)])
    assert len(short) == 3


def test_rejections_shorten_drafts_until_none_pay_and_costly_drafts_are_fewer():
    spec, task = speculator(), task_of(QUOTE, QUOTE[:3])
    before = len(spec.drafts([(task, 99)])[0])
    for _ in range(6):
        spec.observe(task, 4, 0)
    assert task.draft_state is not None
    assert len(spec.drafts([(task, 99)])[0]) < before
    for _ in range(20):
        spec.observe(task, 4, 0)
    assert spec.drafts([(task, 99)]) == [[]]
    costly = speculator(cost=DraftCost(fixed=0.9))  # a draft token ~ a step
    assert len(costly.drafts([(task_of(QUOTE, QUOTE[:3]), 99)])[0]) < before


def test_the_cost_is_measured_from_steps():
    cost = DraftCost()
    cost.observe(2, 0, 0.020)  # 10 ms per generating slot
    assert cost.ratio(2) == 0.5  # the prior, until a draft token is timed
    for _ in range(50):
        cost.observe(2, 0, 0.020)
        cost.observe(2, 4, 0.028)  # 2 ms per draft token
    assert abs(cost.ratio(2) - 0.2) < 0.01


def test_each_batch_size_has_its_own_cost_and_an_untimed_one_drafts_nothing():
    cost = DraftCost()
    assert cost.ratio(1) == math.inf  # nothing timed: the first step goes without drafts
    for _ in range(50):
        cost.observe(1, 0, 0.009)  # one slot: 9 ms a step
        cost.observe(1, 2, 0.018)  # 4.5 ms per draft token
    assert abs(cost.ratio(1) - 0.5) < 0.01
    assert cost.ratio(4) == math.inf
    for _ in range(50):
        cost.observe(4, 0, 0.024)  # four slots: 6 ms each
        cost.observe(4, 2, 0.033)  # the same 4.5 ms per draft token
    # Worth less of a busy step's tokens (a one-slot tau would make m look like 0 here).
    assert abs(cost.ratio(4) - 0.75) < 0.01
    assert abs(cost.ratio(1) - 0.5) < 0.01


def test_a_busy_batch_drafts_shorter_than_a_lone_slot():
    cost = DraftCost(tau={1: 0.009, 4: 0.006}, m=0.003)  # ratios 0.33 and 0.5
    spec = speculator(cost=cost)
    (alone,) = spec.drafts([(task_of(QUOTE, QUOTE[:3]), 99)])
    busy = spec.drafts([(task_of(QUOTE, QUOTE[:3]), 99) for _ in range(4)])
    assert 0 < max(len(d) for d in busy) < len(alone)


def test_ngram_docs_drafts_from_an_earlier_reply_on_the_documents():
    spec = speculator("ngram-docs")
    docs = frozenset({"d1"})
    spec.finished(task_of([1, 2, 3], QUOTE, docs))
    later = task_of([7, 8, 9], QUOTE[:3], docs)
    draft = spec.drafts([(later, 99)])[0]
    assert draft and draft == QUOTE[3 : 3 + len(draft)]
    plain = speculator("ngram-simple")
    plain.finished(task_of([1, 2, 3], QUOTE, docs))
    assert plain.drafts([(task_of([7, 8, 9], QUOTE[:3], docs), 99)]) == [[]]
    spec.forget({"d1"})
    assert spec.drafts([(task_of([7, 8, 9], QUOTE[:3], docs), 99)]) == [[]]


def test_the_source_that_agrees_longest_drafts_and_an_earlier_reply_wins_a_tie():
    docs = frozenset({"d1"})
    answer = [60, 61, 62, 63, 64, 65, 66, 67]
    # The prompt holds the answer's first three tokens, followed by something else.
    prompt = [1, 2, 60, 61, 62, 99, 98, 97, 3, 4]
    spec = speculator("ngram-docs")
    spec.finished(task_of([5], answer, docs))
    (draft,) = spec.drafts([(task_of(prompt, answer[:3], docs), 99)])
    assert draft and draft == answer[3 : 3 + len(draft)]  # a tie (3 tokens): the reply
    # Where the prompt agrees longer with the context's end than the reply does, the prompt.
    prompt = [7, 8, 60, 61, 62, 99, 98, 97, 7, 8]  # ends as its 60 61 62 is preceded: 5 agree
    spec = speculator("ngram-docs")
    spec.finished(task_of([5], [3, 60, 61, 62, 50, 51, 52], docs))  # 3 agree
    (draft,) = spec.drafts([(task_of(prompt, answer[:3], docs), 99)])
    assert draft[:5] == [99, 98, 97, 7, 8]


def test_a_long_match_drafts_where_short_ones_do_not_pay():
    # A draft token costs 0.8 of a step: more than a 3-token match's prior chance (0.75).
    spec = speculator(cost=DraftCost(fixed=0.8))
    (short,) = spec.drafts([(task_of(QUOTE, QUOTE[:3]), 99)])
    assert short == []
    # The reply so far repeats the prompt's first 14 tokens: the match agrees over all 14.
    (long,) = spec.drafts([(task_of(QUOTE, QUOTE[:14]), 99)])
    assert long and long == QUOTE[14 : 14 + len(long)]


def test_each_kind_of_evidence_learns_its_own_acceptance():
    spec = speculator(cost=DraftCost(fixed=0.5))
    # The context ends 7, Q0, Q1, Q2: the prompt's Q0, Q1, Q2 agrees with it over 3 tokens.
    task = task_of([*QUOTE, 7, *QUOTE[:3]], [])
    (short,) = spec.drafts([(task, 99)])
    assert short and task.draft_state is not None
    for _ in range(20):
        spec.observe(task, len(short), 0)  # every short draft rejected
    assert spec.drafts([(task, 99)]) == [[]]
    task.generated = QUOTE[3:12]  # now the context repeats QUOTE[:12] after the 7
    (long,) = spec.drafts([(task, 99)])
    assert long == QUOTE[12 : 12 + len(long)] and len(long) >= 4


def test_a_question_asked_again_drafts_its_earlier_answer_from_the_first_token():
    # A draft token costs 0.8 of a step: only a long match drafts.
    docs = frozenset({"d1"})
    question = list(range(200, 220))
    answer = list(range(300, 316))
    spec = speculator("ngram-docs", cost=DraftCost(fixed=0.8))
    spec.finished(task_of(question, answer, docs))
    (draft,) = spec.drafts([(task_of(question, answer[:1], docs), 99)])
    assert draft and draft == answer[1 : 1 + len(draft)]
    (other,) = spec.drafts([(task_of([1, *question[-3:]], answer[:1], docs), 99)])
    assert other == []  # another question that ends alike: a short match, not worth it
