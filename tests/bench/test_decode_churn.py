"""bench.decode_churn's report: rows side by side with the ours/llama-server ratio."""

from __future__ import annotations

from bench import decode_churn


def server(tok_s: float, ttft: float, gap: float) -> dict:
    return {
        "decode": {"streamed_tok_s": tok_s, "whole_tok_s": tok_s},
        "churn": {"warm_ttft_s": ttft, "gap_p95_s": gap, "gap_max_s": 2 * gap, "swaps": 12},
    }


def test_table_has_every_row_with_the_ratio_to_llama_server():
    report = {
        "bare_loop": {"tokens_per_s": 160.0},
        "servers": {"ours": server(150.0, 0.2, 0.02), "llama-server": server(150.0, 0.25, 0.01)},
    }
    md = decode_churn.markdown(report)
    assert "160.0 tok/s" in md
    assert "| single-stream decode, streamed tok/s | 150.000 | 150.000 | 1.00 |" in md
    assert "| churn: swapping turns' mean TTFT s | 0.200 | 0.250 | 0.80 |" in md
    assert "| churn: decoding stream's p95 gap s | 0.020 | 0.010 | 2.00 |" in md
