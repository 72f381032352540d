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


class FakePeer:
    def __init__(self, name: str) -> None:
        self.name, self.base_url = name, f"http://{name}"


def test_single_stream_rounds_alternate_between_servers_and_report_medians(monkeypatch):
    calls: list[str] = []
    rates = {"http://ours": iter([100.0, 300.0, 120.0]), "http://peer": iter([90.0, 95.0, 500.0])}

    def single_stream(base_url: str, n_tokens: int, bias: dict) -> dict:
        calls.append(base_url)
        rate = next(rates[base_url])
        return {"streamed_tok_s": rate, "whole_tok_s": rate + 1}

    monkeypatch.setattr(decode_churn, "single_stream", single_stream)
    plan = decode_churn.Plan(decode_tokens=8, decode_rounds=3, sessions=1, paragraphs=1, turns=1)
    started = {"ours": FakePeer("ours"), "llama-server": FakePeer("peer")}
    out = decode_churn.alternating(started, plan, {})  # type: ignore[arg-type]
    # Turn by turn, so a drift of the machine's speed lands on both servers alike.
    assert calls == ["http://ours", "http://peer"] * 3
    assert out["ours"] == {"streamed_tok_s": 120.0, "whole_tok_s": 121.0}
    assert out["llama-server"] == {"streamed_tok_s": 95.0, "whole_tok_s": 96.0}
