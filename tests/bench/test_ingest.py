"""bench.ingest's report (targets against `before`, its table) on a made-up result; the servers
and embedders it drives are exercised by tests/app/api/kvchat/test_document_formats.py."""

from __future__ import annotations

from bench import ingest


def variant(doc_qa: float, pdfs: float) -> dict:
    chunks = {"doc_qa": 60, "pdfs": 187}
    return {"doc_qa": doc_qa, "pdfs": pdfs, "first_ready_s": 1.0, "chunks": chunks, "runs": []}


def quality(torch: float, default: float) -> dict:
    backends = {
        "torch": {"recall@4": torch, "mrr": 0.8},
        "onnx-int8": {"recall@4": default, "mrr": 0.8},
    }
    return {
        "default": "onnx-int8",
        "sets": {"generated": {"chunks": 9, "questions": 3, "backends": backends}},
    }


def test_targets_compare_the_default_with_before_and_fp32():
    report = {
        "variants": {"before": variant(10.0, 12.0), "onnx-int8": variant(35.0, 30.0)},
        "pdfs": ["a.pdf", "b.pdf"],
        "quality": quality(0.90, 0.87),
    }
    rows = {name: (ratio, verdict) for name, ratio, _, verdict in ingest.targets(report)}
    assert rows["ingestion chunks/s, doc_qa"] == (3.5, "met")
    assert rows["ingestion chunks/s, pdfs"] == (2.5, "not met")
    diff, verdict = rows["recall@4 vs fp32 (difference), generated"]
    assert round(diff, 3) == -0.03 and verdict == "not met"
    table = ingest.markdown(report)
    assert "| onnx-int8 | 35.0 | 3.50 | 30.0 | 2.50 | 1.0 |" in table
    assert "| generated | 9 | 3 | onnx-int8 | 0.870 | 0.800 |" in table
    assert "| target |" not in ingest.markdown(report, with_targets=False)
