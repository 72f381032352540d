"""bench.lib.report: one report holds every part of a bench.compare run, and its Targets table
lists the targets of every part that ran (bench.lib.targets), with no server needed."""

from __future__ import annotations

from bench import decode_churn
from bench.lib import doc_qa_report, report
from bench.lib.targets import target
from bench.workloads.doc_qa_workload import QUICK


def test_a_target_is_met_on_the_right_side_of_its_bound():
    assert target("t", 0.5, 1.0, 1.0, at_most=True) == ("t", 0.5, "≤ 1", "met")
    assert target("t", 2.0, 1.0, 1.1, at_most=True)[3] == "not met"
    assert target("t", 0.96, 1.0, 0.95, at_most=False) == ("t", 0.96, "≥ 0.95", "met")
    assert target("t", None, 1.0, 1.0, at_most=True) == ("t", None, "≤ 1", "–")


def churn_server(tok_s: float, ttft: float, gap: float) -> dict:
    return {
        "decode": {"streamed_tok_s": tok_s, "whole_tok_s": tok_s},
        "churn": {"warm_ttft_s": ttft, "gap_p95_s": gap, "gap_max_s": 2 * gap, "swaps": 3},
    }


def qa_row(mean: float) -> dict:
    return {"n": 6, "mean_ttft": mean, "p50_ttft": mean, "p95_ttft": mean, "cached_share": 0.5}


def full_report() -> dict:
    key = "8 clients x 16 tokens"

    def prefix_server(rate: float) -> dict:
        return {"scenarios": {}, "throughput": {key: {"tokens_per_s": rate}}, "errors": {}}

    return {
        "date": "2026-01-01",
        "quick": True,
        "model": "m.gguf",
        "machine": {"cpu": "CPU", "cores": 2, "mem_gib": 24},
        "versions": {"ours": "kvchat x", "llama-server": "ls y"},
        "scenario_names": [],
        "throughput_names": [key],
        "servers": {"ours": prefix_server(90.0), "llama-server": prefix_server(100.0)},
        "failed": {},
        "decode_churn": {
            "bare_loop": {"tokens_per_s": 130.0},
            "servers": {
                "ours": churn_server(122.0, 0.10, 0.09),
                "llama-server": churn_server(134.0, 0.09, 0.09),
            },
            "failed": {},
        },
        "doc_qa": {
            "plan": QUICK.__dict__,
            "rows": {"ours": qa_row(0.2), doc_qa_report.SCORE_ORDER: qa_row(0.6)},
            "failed": {},
            "ingest_s": 1.0,
            "chunks": 6,
            "chunks_per_s": 6.0,
            "embedder_load_s": 4.0,
            "retrieval_ms": 100.0,
        },
    }


def test_one_targets_table_lists_the_targets_of_every_part():
    rows = {name: (bound, verdict) for name, _, bound, verdict in report.targets(full_report())}
    assert rows == {
        "aggregate tok/s: 8 clients x 16 tokens": ("≥ 1", "not met"),
        "single-stream decode, streamed tok/s": ("≥ 0.95", "not met"),
        "single-stream decode, whole tok/s": ("≥ 0.95", "not met"),
        "churn: swapping turns' mean TTFT s": ("≤ 1.1", "not met"),
        "churn: decoding stream's p95 gap s": ("≤ 1.1", "met"),
        "document QA mean TTFT, chunks in score order": ("≤ 0.5", "met"),
    }
    md = report.markdown(full_report())
    assert md.index("| aggregate decode tok/s |") < md.index("bare decode loop")
    assert md.index("bare decode loop") < md.index("Document QA") < md.index("Targets")
    assert "| churn: swapping turns' mean TTFT s | 0.100 | 0.090 | 1.11 |" in md
    assert "| document QA mean TTFT, chunks in score order | 0.33 | ≤ 0.5 | met |" in md


def test_a_part_that_did_not_run_leaves_its_rows_and_targets_out():
    r = full_report()
    del r["doc_qa"]
    r["failed"]["document-QA rows"] = "RuntimeError: boom"
    md = report.markdown(r)
    assert "Document QA" not in md and "document QA mean TTFT" not in md
    assert "document-QA rows failed to run: RuntimeError: boom" in md
    # llama-server did not run the churn: ours' rows alone, no ratio and no target.
    churn = r["decode_churn"]
    del churn["servers"]["llama-server"]
    churn["failed"]["llama-server"] = "PeerUnavailable: not built"
    assert decode_churn.targets(churn) == []
    table = decode_churn.markdown(churn)
    assert "| single-stream decode, whole tok/s | 122.000 |  |" in table
    assert "llama-server failed: PeerUnavailable: not built" in table


def test_the_headline_has_one_row_per_target_with_both_values():
    r = full_report()
    md = report.headline(r)
    assert "| aggregate tok/s: 8 clients x 16 tokens | 90.0 | 100.0 | 0.90 | ≥ 1: not met |" in md
    assert "| churn: decoding stream's p95 gap s | 0.090 | 0.090 | 1.00 | ≤ 1.1: met |" in md
    assert (
        "| document QA mean TTFT, chunks in score order | 0.200 | 0.600 | 0.33 | ≤ 0.5: met |" in md
    )
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(report.targets(r)) and all(row.endswith("met |") for row in rows)
    assert "Targets met: 2 of 6." in md


def test_a_headline_without_llama_server_shows_ours_alone():
    r = full_report()
    del r["servers"]["llama-server"]
    md = report.headline(r)
    assert "| aggregate tok/s: 8 clients x 16 tokens | 90.0 | – | – |  |" in md
    assert "Targets met: 2 of 5." in md  # decode churn and document QA ran against it apart


def test_the_tables_go_between_the_markers_and_nowhere_else(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(f"intro\n{report.START}\nold\n{report.END}\nafter\n")
    assert report.write_between_markers(page, "new\n")
    assert page.read_text() == f"intro\n{report.START}\nnew\n{report.END}\nafter\n"
    unmarked = tmp_path / "plain.md"
    unmarked.write_text("no markers\n")
    assert not report.write_between_markers(unmarked, "new\n")
    assert unmarked.read_text() == "no markers\n"


def test_readme_and_benchmarks_page_carry_the_markers():
    for path in (report.README, report.BENCHMARKS):
        text = path.read_text()
        assert text.count(report.START) == 1 and text.index(report.START) < text.index(report.END)
