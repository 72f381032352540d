"""Retrieval quality of each embedding backend against torch fp32 (bench/ingest.py's second part).

Two question sets, in-process (the embedders alone, exact inner-product search):
- generated: documents like the doc-QA bench's (topic paragraphs of random words), each with
  one planted fact ("The keeper of the lantern vault in district 7 is Orla Brandt."); a question
  asks for it in other words; the relevant chunk is the one holding the fact;
- real text: this repository's docs/*.md and README.md, chunked; a question is one sentence
  taken from the middle of a chunk; relevant are the chunks holding that sentence.
Per backend: recall@4 (share of questions with a relevant chunk in the top 4) and MRR (mean of
1 / rank of the first relevant chunk). Target: the default backend within 0.02 recall@4 of fp32.
"""

from __future__ import annotations

import random
import re

import numpy as np

from bench.lib.core import TOPICS
from bench.lib.server_process import ROOT
from bench.lib.targets import Target
from bench.workloads.doc_qa_workload import WORDS
from rag.chunker import Chunker
from rag.embedder import BACKENDS, DEFAULT_BACKEND, load_embedder
from rag.loader import LoadedDocument

K = 4
ROLES = ["keeper", "treasurer", "archivist", "surveyor", "warden", "clerk", "pilot", "miller"]
PLACES = ["lantern vault", "copper mill", "river gate", "north quarry", "salt market", "bell tower"]
NAMES = ["Orla", "Tomas", "Ines", "Bram", "Sefa", "Katja", "Emil", "Noor", "Ravi", "Lena"]
SURNAMES = ["Brandt", "Okafor", "Silva", "Novak", "Haines", "Moreau", "Tanaka", "Quist"]


def generated(n_docs: int, rnd: random.Random) -> tuple[list[str], list[str], list[set[int]]]:
    """(chunks, questions, relevant chunk indexes per question)."""
    chunker = Chunker(lambda t: len(t.split()), 150, 15)
    chunks: list[str] = []
    questions, relevant = [], []
    for d in range(n_docs):
        topic = TOPICS[d % len(TOPICS)]
        paragraphs = [
            f"Note {p + 1} on the {topic} of district {d}: "
            + " ".join(rnd.choice(WORDS) for _ in range(45))
            for p in range(4)
        ]
        role, place = rnd.choice(ROLES), rnd.choice(PLACES)
        person = f"{rnd.choice(NAMES)} {rnd.choice(SURNAMES)}"
        fact = f"The {role} of the {place} in district {d} is {person}."
        at = rnd.randrange(len(paragraphs))
        paragraphs[at] += " " + fact
        text = "\n\n".join(paragraphs)
        first = len(chunks)
        pieces = [c.text for c in chunker.split(LoadedDocument(text, "text"))]
        chunks += pieces
        questions.append(f"Who serves as {role} for the {place} of district {d}?")
        relevant.append({first + i for i, c in enumerate(pieces) if fact in c})
    return chunks, questions, relevant


def real_text(n_questions: int, rnd: random.Random) -> tuple[list[str], list[str], list[set[int]]]:
    chunker = Chunker(lambda t: len(t.split()), 150, 15)
    chunks: list[str] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        doc = LoadedDocument(path.read_text(), "markdown")
        chunks += [c.text for c in chunker.split(doc)]
    candidates = []
    for chunk in chunks:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", chunk) if len(s.split()) >= 8]
        if len(sentences) >= 3:
            candidates.append(sentences[len(sentences) // 2])
    picked = rnd.sample(candidates, min(n_questions, len(candidates)))
    relevant = [{i for i, c in enumerate(chunks) if q in c} for q in picked]
    return chunks, picked, relevant


def scores(
    vectors: np.ndarray, queries: np.ndarray, relevant: list[set[int]]
) -> tuple[float, float]:
    """(recall@K, MRR) of exact inner-product search."""
    order = np.argsort(-(queries @ vectors.T), axis=1)
    hits, rr = 0, 0.0
    for row, want in zip(order, relevant, strict=True):
        ranks = [int(np.where(row == i)[0][0]) for i in want]
        best = min(ranks)
        hits += best < K
        rr += 1.0 / (best + 1)
    return hits / len(relevant), rr / len(relevant)


def run(quick: bool = False, backends: tuple[str, ...] = BACKENDS) -> dict:
    rnd = random.Random(31)
    sets = {
        "generated": generated(40 if quick else 400, rnd),
        "real text": real_text(40 if quick else 150, rnd),
    }
    out: dict = {"sets": {}, "default": DEFAULT_BACKEND}
    for name, (chunks, questions, _) in sets.items():
        out["sets"][name] = {"chunks": len(chunks), "questions": len(questions), "backends": {}}
    for backend in backends:
        embedder = load_embedder(backend, threads=2)
        for name, (chunks, questions, relevant) in sets.items():
            recall, mrr = scores(embedder.embed(chunks), embedder.embed(questions), relevant)
            out["sets"][name]["backends"][backend] = {"recall@4": recall, "mrr": mrr}
    return out


def targets(report: dict) -> list[Target]:
    """Default backend's recall@4 minus fp32's, per set (bound: -0.02)."""
    rows = []
    for name, s in report["sets"].items():
        got = s["backends"]
        if "torch" in got and report["default"] in got:
            diff = got[report["default"]]["recall@4"] - got["torch"]["recall@4"]
            verdict = "met" if round(diff, 6) >= -0.02 else "not met"  # float noise aside
            rows.append((f"recall@4 vs fp32 (difference), {name}", diff, "≥ -0.02", verdict))
    return rows


def markdown(report: dict) -> str:
    lines = ["Retrieval quality per backend (exact search, top 4):", ""]
    lines += [
        "| set | chunks | questions | backend | recall@4 | MRR |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for name, s in report["sets"].items():
        for backend, v in s["backends"].items():
            lines.append(
                f"| {name} | {s['chunks']} | {s['questions']} | {backend} | "
                f"{v['recall@4']:.3f} | {v['mrr']:.3f} |"
            )
    return "\n".join(lines)
