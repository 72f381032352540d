"""bench.draft_cost on the packaged model: every batch size and draft length is timed."""

from __future__ import annotations

from app.config_derived import packaged_model_path
from bench import draft_cost


def test_times_each_batch_size_and_draft_length_and_prints_a_row_per_size():
    result = draft_cost.measure(packaged_model_path(), ctx=32, threads=2, repeats=1)
    assert set(result) == set(draft_cost.BATCH_SIZES)
    for row in result.values():
        assert set(row) == set(draft_cost.DRAFTS) and all(s > 0 for s in row.values())
    table = draft_cost.lines(result)
    assert len(table) == 2 + len(draft_cost.BATCH_SIZES)
    assert table[2].startswith("| 1 |") and table[-1].startswith("| 4 |")
