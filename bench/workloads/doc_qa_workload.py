"""The document-QA bench's workload (bench/doc_qa.py): generated documents and the questions.

Each document is about one topic (bench.lib.core's TOPICS): a few paragraphs naming it around random
words. Questions pick topics Zipf-popular (s = 1.1), phrased a few ways, so the chunks of popular
topics are retrieved again and again (`TOP_K` chunks per question). Both are drawn from the
caller's seeded `random.Random`, so a run is repeatable. `FULL` is the measured size, `QUICK` a
smoke test (`--quick`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.lib.core import TOPICS

WORDS = [
    "stone",
    "river",
    "market",
    "lantern",
    "harvest",
    "copper",
    "window",
    "garden",
    "ledger",
    "signal",
    "meadow",
    "anchor",
    "timber",
    "valley",
    "beacon",
    "orchard",
    "quarry",
    "furnace",
    "compass",
    "harbour",
    "archive",
    "canal",
    "bridge",
    "tower",
]


@dataclass(frozen=True)
class Plan:
    documents: int
    paragraphs: int  # per document (~65 tokens each)
    questions: int
    topics: int


FULL = Plan(documents=30, paragraphs=4, questions=40, topics=10)
QUICK = Plan(documents=6, paragraphs=1, questions=6, topics=3)
TOP_K = 4  # chunks retrieved per question


def corpus(plan: Plan, rnd: random.Random) -> list[tuple[str, str, str]]:
    """(filename, topic, text) per document; each document is about one topic."""
    docs = []
    for i in range(plan.documents):
        topic = TOPICS[i % plan.topics]
        paragraphs = []
        for p in range(plan.paragraphs):
            words = " ".join(rnd.choice(WORDS) for _ in range(40))
            paragraphs.append(
                f"Note {p + 1} on the {topic} of district {i}: the {topic} keep records of "
                f"{words}. People who study {topic} remember this."
            )
        docs.append((f"{topic}-{i}.txt", topic, "\n\n".join(paragraphs)))
    return docs


def questions(plan: Plan, rnd: random.Random) -> list[str]:
    """Zipf-popular topics (s = 1.1), phrased a few ways."""
    weights = [1 / (k + 1) ** 1.1 for k in range(plan.topics)]
    forms = [
        "What do the notes say about the {t}?",
        "Summarise what is recorded about {t}.",
        "Which records do the {t} keep?",
        "Tell me about the {t}.",
    ]
    out = []
    for _ in range(plan.questions):
        topic = rnd.choices(TOPICS[: plan.topics], weights)[0]
        out.append(rnd.choice(forms).format(t=topic))
    return out
