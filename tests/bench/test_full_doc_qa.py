"""bench.full_doc_qa: its workload (facts scattered so that an answer needs more than 4 chunks),
its scoring, and a --quick run of ours through the real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import full_doc_qa
from bench.workloads.full_doc_workload import FULL, QUICK, score, workload


def test_each_answer_needs_more_than_four_paragraphs():
    work = workload(FULL)
    assert len(work.documents) == FULL.documents and len(work.questions) == FULL.goods
    paragraphs = [p for _, text in work.documents for p in text.split("\n\n")]
    assert len(paragraphs) == FULL.documents * FULL.paragraphs
    for q in work.questions:
        holding = [
            i
            for i, p in enumerate(paragraphs)
            if any(f"town of {t} received a shipment of {q.good}." in p for t in q.towns)
        ]
        assert len(holding) == len(q.towns) == FULL.towns_per_good > 4
    assert {q.conversation for q in work.questions} == set(range(FULL.conversations))
    assert workload(FULL) == work  # the same every run


def test_an_answer_scores_by_the_towns_it_names():
    towns = ("Arden", "Belmar", "Corvin", "Dunmore", "Elsby")
    assert score("Arden, Belmar, Corvin, Dunmore and Elsby.", towns) == (1.0, True)
    assert score("arden and belmar", towns) == (0.4, False)
    assert score("I do not know.", towns) == (0.0, False)
    assert score("Ardenne", towns) == (0.0, False)  # words, not substrings


@pytest.mark.slow
def test_quick_run_of_ours(tmp_path: Path):
    assert full_doc_qa.main(["--quick", "--servers", "ours", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "full-doc-qa-quick.json").read_text())
    rows = report["full_vs_retrieval"]["rows"]
    assert rows["full"]["n"] == rows["retrieval"]["n"] == QUICK.goods
    # The background prefill made the collection's prefix: full questions compute only
    # themselves.
    assert rows["full"]["cached_share"] > 0.8
    assert report["interleaved"]["ours"]["cpu_s"] > 0
    assert "llama-server" not in report["interleaved"]
    assert "| full / retrieval |" in (tmp_path / "full-doc-qa-quick.md").read_text()
