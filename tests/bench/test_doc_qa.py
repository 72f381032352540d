"""bench.doc_qa: the report, and a --quick run of ours through the real server."""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench import doc_qa
from bench.core import TOPICS
from bench.doc_qa_workload import FULL, QUICK, questions


def row(mean: float, share: float | None) -> dict:
    return {"n": 4, "mean_ttft": mean, "p50_ttft": mean, "p95_ttft": mean, "cached_share": share}


def test_report_compares_ours_with_llama_server_score_order():
    report = {
        "plan": FULL.__dict__,
        "rows": {
            "ours": row(0.2, 0.9),
            "llama-server, score order": row(1.0, 0.1),
            "llama-server, canonical order": row(0.5, 0.6),
        },
        "failed": {},
        "ingest_s": 10.0,
        "chunks": 60,
        "chunks_per_s": 6.0,
        "embedder_load_s": 7.0,
        "retrieval_ms": 12.0,
    }
    md = doc_qa.markdown(report)
    assert "| ours | 0.200 | 0.200 | 0.200 | 0.90 |" in md
    assert "mean TTFT: 0.20 (≤ 0.5: met)" in md
    assert "30 documents, 40 questions" in md and "6.0 chunks/s" in md


def test_each_blend_k_gets_its_own_targets():
    report = {
        "plan": FULL.__dict__,
        "rows": {
            "ours": row(0.5, 0.8),
            "ours, blend": row(0.6, 0.8),
            "ours, new combinations": row(0.4, 0.8),
            "ours, blend, new combinations": row(0.4, 0.9),
            "ours, blend, k=4": row(0.2, 0.9),
            "ours, blend, new combinations, k=4": row(0.1, 0.9),
            "llama-server, score order": row(1.0, 0.5),
        },
        "failed": {},
        **{"ingest_s": 1.0, "chunks": 6, "chunks_per_s": 6.0, "embedder_load_s": 1.0},
        "retrieval_ms": 1.0,
    }
    verdicts = {name: verdict for name, _, _, verdict in doc_qa.targets(report)}
    assert verdicts == {
        doc_qa.TARGET: "met",
        "document QA mean TTFT with blend, chunks in score order": "not met",
        "document QA new combinations mean TTFT, blend vs prefix reuse": "not met",
        "document QA mean TTFT with blend, k=4, chunks in score order": "met",
        "document QA new combinations mean TTFT, blend, k=4 vs prefix reuse": "met",
    }
    md = doc_qa.markdown(report)
    assert "blend, k=4, chunks in score order: ours / llama-server, mean TTFT: 0.20" in md
    assert "ours blend, k=4 vs prefix reuse, new combinations, mean TTFT: 0.25 (≤ 0.35: met)" in md
    assert "ours blend vs prefix reuse, new combinations, mean TTFT: 1.00 (≤ 0.35: not met)" in md


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


def test_quick_run_of_ours(tmp_path: Path):
    assert doc_qa.main(["--quick", "--servers", "ours", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "doc-qa-quick.json").read_text())
    ours = report["rows"]["ours"]
    assert ours["n"] == QUICK.questions and ours["mean_ttft"] > 0
    assert report["chunks"] >= QUICK.documents and report["retrieval_ms"] > 0
    # Popular topics come back: some context is served from the cache.
    assert ours["cached_share"] > 0
    assert "| ours |" in (tmp_path / "doc-qa-quick.md").read_text()
