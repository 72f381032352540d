"""Which chunks an answer used, found from the answer's text (full-document mode's citations).

A full-mode prompt holds every chunk of the collection, so "the chunks in the prompt" says
nothing; the reply cites the chunks the answer quoted or named instead:

1. Named: a `[n]` in the answer that is the number of a chunk of the prompt (the system prompt
   asks the model to cite so) names that chunk.
2. Quoted: the answer's word trigrams (lowercased runs of letters and digits), less those made of
   stopwords only and those the question itself holds (an answer that repeats the question
   quotes no source), are looked up in each chunk's trigrams. A chunk holding at least
   MIN_SHARED of them (or all, when the answer has fewer) was quoted; its score is the share of
   the answer's trigrams it holds.
3. A short answer with no trigram left (a name, a number): a chunk holding every one of its
   words that are neither stopwords nor the question's was used; score 1 over how many such
   chunks there are (a word every chunk holds says little).

Named chunks score 1.0. The sources are ordered by score, then by their place in the prompt, at
most MAX_SOURCES of them. An answer that quotes and names nothing cites nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.db.documents.document_records import ChunkRecord

WORD = re.compile(r"\w+")
MARK = re.compile(r"\[(\d{1,9})\]")
NGRAM = 3
MIN_SHARED = 2
MAX_SOURCES = 8
_STOP = """a an and are as at be been but by can did do does for from had has have he her his how
i if in into is it its me my no not of on or our she so than that the their them then there these
they this those to was we were what when where which who why will with you your yes also about
after before all any each more most other some such only own same very just over under again
further once here both few nor out off up down"""
STOPWORDS = frozenset(_STOP.split())

Gram = tuple[str, ...]


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def grams(ws: Sequence[str], n: int = NGRAM) -> set[Gram]:
    return {tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)}


@dataclass(slots=True)
class ChunkWords:
    """A chunk's words and trigrams, computed once per prefix."""

    words: frozenset[str]
    grams: frozenset[Gram]


def index(chunks: Sequence[ChunkRecord]) -> list[ChunkWords]:
    out = []
    for c in chunks:
        ws = words(c.text)
        out.append(ChunkWords(frozenset(ws), frozenset(grams(ws))))
    return out


@dataclass(slots=True, frozen=True)
class Used:
    chunk: ChunkRecord
    score: float


def used_chunks(
    answer: str,
    question: str,
    chunks: Sequence[ChunkRecord],
    indexed: Sequence[ChunkWords] | None = None,
) -> list[Used]:
    """The chunks (of the prompt, in its order) that the answer named or quoted, best first."""
    indexed = index(chunks) if indexed is None else indexed
    scores: dict[int, float] = {}  # position in the prompt -> score
    by_number = {c.number: i for i, c in enumerate(chunks)}
    for mark in MARK.findall(answer):
        at = by_number.get(int(mark))
        if at is not None:
            scores[at] = 1.0
    said, asked = words(answer), words(question)
    wanted = grams(said) - grams(asked)
    wanted = {g for g in wanted if not all(w in STOPWORDS for w in g)}
    if wanted:
        need = min(MIN_SHARED, len(wanted))
        for i, cw in enumerate(indexed):
            shared = len(wanted & cw.grams)
            if shared >= need:
                scores[i] = max(scores.get(i, 0.0), shared / len(wanted))
    else:
        terms = {w for w in said if w not in STOPWORDS} - set(asked)
        holding = [i for i, cw in enumerate(indexed) if terms and terms <= cw.words]
        for i in holding:
            scores[i] = max(scores.get(i, 0.0), 1.0 / len(holding))
    best = sorted(scores, key=lambda i: (-scores[i], i))[:MAX_SOURCES]
    return [Used(chunks[i], round(scores[i], 4)) for i in best]
