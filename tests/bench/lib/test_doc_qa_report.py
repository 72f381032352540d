"""bench.lib.doc_qa_report: the table and the targets, from made-up reports."""

from __future__ import annotations

from bench.lib import doc_qa_report
from bench.workloads.doc_qa_workload import FULL


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
    md = doc_qa_report.markdown(report)
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
    verdicts = {name: verdict for name, _, _, verdict in doc_qa_report.targets(report)}
    assert verdicts == {
        doc_qa_report.TARGET: "met",
        "document QA mean TTFT with blend, chunks in score order": "not met",
        "document QA new combinations mean TTFT, blend vs prefix reuse": "not met",
        "document QA mean TTFT with blend, k=4, chunks in score order": "met",
        "document QA new combinations mean TTFT, blend, k=4 vs prefix reuse": "met",
    }
    md = doc_qa_report.markdown(report)
    assert "blend, k=4, chunks in score order: ours / llama-server, mean TTFT: 0.20" in md
    assert "ours blend, k=4 vs prefix reuse, new combinations, mean TTFT: 0.25 (≤ 0.35: met)" in md
    assert "ours blend vs prefix reuse, new combinations, mean TTFT: 1.00 (≤ 0.35: not met)" in md


def test_the_report_says_what_the_blend_rows_answers_are_worth():
    gate = {
        "blend_sink_tokens": 4,
        "blend_forced": True,
        "blend_agreement": {"k": 4, "exact_greedy": 0.0, "f1": 0.41, "questions": 12},
    }
    line = doc_qa_report.gate_line(gate)
    assert line == (
        "Blend at k = 4 (forced past the quality gate: --blend-force): its answers matched full "
        "prefill's in 0% of the quality set (answer F1 0.41, bench.blend_quality at k = 4)."
    )
    unmeasured = {"blend_sink_tokens": 16, "blend_forced": False, "blend_agreement": None}
    assert doc_qa_report.gate_line(unmeasured) == (
        "Blend at k = 16: never measured against full prefill."
    )
