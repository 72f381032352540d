"""The chunks an answer used, found from its text: named by number, quoted, or a short answer's
words; never every chunk."""

from __future__ import annotations

from app.db.documents.document_records import ChunkRecord
from app.docs.questions.answer_sources import MAX_SOURCES, used_chunks

TEXTS = [
    "Cats sleep up to sixteen hours a day and purr when they are content.",
    "The Saturn V rocket had five F-1 engines in its first stage.",
    "Mount Etna is an active volcano in Sicily; lava flows down its slopes.",
    "Sourdough rises with wild yeast kept in a flour starter.",
]


def chunks(texts: list[str] = TEXTS) -> list[ChunkRecord]:
    return [
        ChunkRecord(i + 10, f"doc-{i}", 0, i + 1, t, 0, len(t), None) for i, t in enumerate(texts)
    ]


def used(answer: str, question: str = "What do you know?") -> list[int]:
    return [u.chunk.number for u in used_chunks(answer, question, chunks())]


def test_a_quoted_chunk_is_cited_and_no_other():
    assert used("The Saturn V had five F-1 engines in its first stage.") == [2]
    assert used("It says that lava flows down its slopes, near Sicily.") == [3]


def test_chunks_named_by_number_are_cited_first():
    found = used_chunks("See [4] and [2]; also [99].", "Which sources?", chunks())
    assert [(u.chunk.number, u.score) for u in found] == [(2, 1.0), (4, 1.0)]


def test_an_answer_that_echoes_the_question_or_says_nothing_cites_nothing():
    assert used("I do not know.") == []
    question = "How many hours a day do cats sleep?"
    assert used("How many hours a day do cats sleep?", question) == []
    assert used("", question) == []


def test_a_short_answer_cites_the_chunks_holding_its_words():
    assert used("Sicily", "Where is Mount Etna?") == [3]
    assert used("Five.", "How many F-1 engines did the Saturn V have?") == [2]
    # A word several chunks hold: each is cited, with a share of the score.
    found = used_chunks("Sixteen", "How long?", chunks([*TEXTS, "Sixteen candles."]))
    assert [(u.chunk.number, u.score) for u in found] == [(1, 0.5), (5, 0.5)]


def test_several_quoted_chunks_are_ranked_by_how_much_of_the_answer_they_hold():
    answer = (
        "Cats sleep up to sixteen hours a day and purr when they are content, while "
        "sourdough rises with wild yeast."
    )
    found = used_chunks(answer, "Tell me two things.", chunks())
    assert [u.chunk.number for u in found] == [1, 4]
    assert found[0].score > found[1].score > 0


def test_at_most_max_sources_are_cited():
    many = chunks([f"Shared words appear here in chunk {i}." for i in range(20)])
    found = used_chunks("Shared words appear here in every chunk.", "Which?", many)
    assert len(found) == MAX_SOURCES
    assert [u.chunk.number for u in found] == list(range(1, MAX_SOURCES + 1))  # prompt order
