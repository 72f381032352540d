"""Speculator with small fake tasks: draft sources, the step budget, adaptive length, pauses."""

from __future__ import annotations

from app.engine.draft_state import FIRST_DRAFT
from app.engine.reply_memory import ReplyMemory
from app.engine.request import GenerationRequest
from app.engine.speculator import Speculator
from app.engine.task import Task
from mm.token_sequence import TokenSequence

QUOTE = list(range(100, 140))


def task_of(
    prompt: list[int], generated: list[int], documents: frozenset[str] = frozenset()
) -> Task:
    task = Task(GenerationRequest(TokenSequence(prompt), documents=documents), lambda e: None, True)
    task.generated = list(generated)
    return task


def speculator(spec_type: str = "ngram-simple", n_max: int = 16) -> Speculator:
    return Speculator(spec_type, 3, n_max, 0, ReplyMemory(3))


def test_drafts_a_quote_of_the_prompt():
    task = task_of([1, 2, *QUOTE], QUOTE[:3])
    (draft,) = speculator().drafts([(task, 99)])
    assert draft == QUOTE[3 : 3 + FIRST_DRAFT]


def test_the_step_budget_is_shared_and_room_is_kept():
    a, b = task_of(QUOTE, QUOTE[:3]), task_of(QUOTE, QUOTE[:3])
    drafts = speculator(n_max=10).drafts([(a, 99), (b, 99)])
    assert [len(d) for d in drafts] == [FIRST_DRAFT, 2]
    (short,) = speculator().drafts([(task_of(QUOTE, QUOTE[:3]), 3)])
    assert len(short) == 3


def test_length_adapts_and_a_slot_that_misses_pauses():
    spec, task = speculator(n_max=64), task_of(QUOTE, QUOTE[:3])
    spec.drafts([(task, 99)])
    spec.observe(task, FIRST_DRAFT, FIRST_DRAFT)
    assert len(spec.drafts([(task, 99)])[0]) == 2 * FIRST_DRAFT
    for _ in range(4):
        spec.observe(task, 8, 0)
    assert task.draft_state is not None and task.draft_state.pause > 0
    assert spec.drafts([(task, 99)]) == [[]]


def test_ngram_docs_drafts_from_an_earlier_reply_on_the_documents():
    spec = speculator("ngram-docs")
    docs = frozenset({"d1"})
    spec.finished(task_of([1, 2, 3], QUOTE, docs))
    later = task_of([7, 8, 9], QUOTE[:3], docs)
    assert spec.drafts([(later, 99)])[0] == QUOTE[3 : 3 + FIRST_DRAFT]
    plain = speculator("ngram-simple")
    plain.finished(task_of([1, 2, 3], QUOTE, docs))
    assert plain.drafts([(task_of([7, 8, 9], QUOTE[:3], docs), 99)]) == [[]]
    spec.forget({"d1"})
    assert spec.drafts([(task_of([7, 8, 9], QUOTE[:3], docs), 99)]) == [[]]
