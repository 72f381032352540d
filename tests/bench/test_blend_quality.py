"""bench.blend_quality on the packaged model: the measure checks itself (a k longer than any
chunk recomputes everything, so blend is full prefill)."""

from __future__ import annotations

from bench import blend_quality


def test_recomputing_every_token_agrees_with_full_prefill():
    (row,) = blend_quality.measure("smollm2", [10_000], 1, 2)
    assert row["model"] == "smollm2" and row["n"] == 1
    assert row["kl"] < 1e-3
    assert row["top1"] == 1.0 and row["exact"] == 1.0
    assert row["f1"] == 1.0  # blend's own greedy answer: full prefill's, word for word
