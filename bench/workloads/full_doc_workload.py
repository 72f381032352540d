"""The full-document bench's workload: a collection with facts scattered across its chunks,
questions whose answers need more than 4 of them, and unrelated chats to put between the
questions.

The collection: `documents` documents of `paragraphs` paragraphs each, every paragraph shorter
than a chunk (200 tokens at the default chunk size), so that a paragraph is a chunk. Facts are
shipments, "In May, the town of Corvin received a shipment of amber.", and each good goes to
`towns_per_good` towns whose facts sit in as many different paragraphs: a question about a good
("Which towns received a shipment of amber?") needs that many chunks, more than the 4 a
retrieval question gets by default. The rest of each paragraph is filler from a small
vocabulary. An answer is scored by which expected towns it names (`score`): `found` is the
share it names, `exact` whether it names them all (the packaged models are tiny: expect little).

Unrelated chats: fresh text (a unique tag first, so nothing of it is cached anywhere) and a short
instruction, as other users' requests that take the slots between two questions.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from bench.lib.core import nonce

GOODS = ("copper", "salt", "wool", "amber", "glass", "iron", "silk", "tin", "flax", "honey")
TOWNS = (
    "Arden", "Belmar", "Corvin", "Dunmore", "Elsby", "Farrow", "Galton", "Hythe", "Ilkmoor",
    "Jarrow", "Kestle", "Lowick", "Marden", "Norcott",
)  # fmt: skip
MONTHS = ("March", "April", "May", "June", "July", "August", "September", "October")
FILLER = (
    "the", "old", "road", "river", "council", "market", "bridge", "harbour", "winter", "mill",
    "north", "south", "wall", "gate", "of", "and", "a", "field", "guild", "ledger", "cart",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Plan:
    documents: int = 6
    paragraphs: int = 4  # per document
    filler_words: int = 95  # per paragraph, with its facts about 140 tokens
    goods: int = 8  # one question each
    towns_per_good: int = 5  # chunks an answer needs
    max_tokens: int = 32  # an answer naming five towns
    conversations: int = 3  # (the interleaved row) each asks its share of the questions
    chats_between: int = 4  # unrelated chats after each question, all at once (one per slot)
    chat_words: int = 300
    chat_max_tokens: int = 16


FULL = Plan()
QUICK = Plan(documents=2, paragraphs=3, filler_words=40, goods=2, conversations=2, chat_words=60)


@dataclass(frozen=True, slots=True)
class Question:
    good: str
    towns: tuple[str, ...]  # the expected answer
    conversation: int

    @property
    def text(self) -> str:
        return f"Which towns received a shipment of {self.good}? Name every one."


@dataclass(frozen=True, slots=True)
class Workload:
    documents: list[tuple[str, str]]  # (filename, text)
    questions: list[Question]  # in the order they are asked


def workload(plan: Plan, seed: int = 54) -> Workload:
    rnd = random.Random(seed)
    n = plan.documents * plan.paragraphs
    if plan.towns_per_good > min(n, len(TOWNS)) or plan.goods > len(GOODS):
        raise ValueError("the plan needs more paragraphs, towns or goods than there are")
    facts: list[list[str]] = [[] for _ in range(n)]
    questions = []
    for i, good in enumerate(GOODS[: plan.goods]):
        towns = tuple(rnd.sample(TOWNS, plan.towns_per_good))
        for town, at in zip(towns, rnd.sample(range(n), plan.towns_per_good), strict=True):
            month = rnd.choice(MONTHS)
            facts[at].append(f"In {month}, the town of {town} received a shipment of {good}.")
        questions.append(Question(good, towns, i % plan.conversations))
    paragraphs = [paragraph(plan.filler_words, f, rnd) for f in facts]
    documents = []
    for d in range(plan.documents):
        body = "\n\n".join(paragraphs[d * plan.paragraphs : (d + 1) * plan.paragraphs])
        documents.append((f"ledger-{d + 1}.txt", body))
    return Workload(documents, questions)


def paragraph(words: int, facts: list[str], rnd: random.Random) -> str:
    """Filler sentences with the facts among them."""
    sentences = []
    left = words
    while left > 0:
        n = min(left, rnd.randint(8, 14))
        sentence = " ".join(rnd.choice(FILLER) for _ in range(n))
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
        left -= n
    for fact in facts:
        sentences.insert(rnd.randint(0, len(sentences)), fact)
    return " ".join(sentences)


def score(answer: str, towns: tuple[str, ...]) -> tuple[float, bool]:
    """(share of the expected towns the answer names, whether it names them all)."""
    said = set(re.findall(r"\w+", answer.lower()))
    found = sum(t.lower() in said for t in towns)
    return found / len(towns), found == len(towns)


def unrelated_chat(words: int, rnd: random.Random) -> list[dict]:
    """Another user's request: fresh text nobody has cached, and a short instruction."""
    body = " ".join(rnd.choice(FILLER) for _ in range(words))
    return [{"role": "user", "content": f"Note {nonce()}.\n{body}\n\nSummarise this note."}]
