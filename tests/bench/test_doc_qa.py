"""bench.doc_qa: its workload and prompts, and a --quick run of ours through the real server."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench import doc_qa
from bench.lib.core import TOPICS
from bench.workloads.doc_qa_workload import FULL, QUICK, questions


def test_questions_follow_zipf_popularity_and_prompts_number_by_rank():
    asked = questions(FULL, random.Random(3))
    counts = [sum(t in q for q in asked) for t in TOPICS[: FULL.topics]]
    assert len(asked) == 40 and counts[0] == max(counts)
    hits = [
        {"filename": "a.txt", "page": None, "text": "x"},
        {"filename": "b.pdf", "page": 2, "text": "y"},
    ]
    user = doc_qa.messages("q?", hits)[1]["content"]
    assert user == "Sources:\n\n[1] a.txt\nx\n\n[2] b.pdf, p. 2\ny\n\nQuestion: q?"


@pytest.mark.slow
def test_quick_run_of_ours(tmp_path: Path):
    assert doc_qa.main(["--quick", "--servers", "ours", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "doc-qa-quick.json").read_text())
    ours = report["rows"]["ours"]
    assert ours["n"] == QUICK.questions and ours["mean_ttft"] > 0
    assert report["chunks"] >= QUICK.documents and report["retrieval_ms"] > 0
    # Popular topics come back: some context is served from the cache.
    assert ours["cached_share"] > 0
    assert "| ours |" in (tmp_path / "doc-qa-quick.md").read_text()
    # The blend rows time blend past the quality gate, and say what its answers are worth.
    assert report["blend_gate"]["blend_forced"] is True
    assert "forced past the quality gate" in (tmp_path / "doc-qa-quick.md").read_text()
