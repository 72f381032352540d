"""The engine's events as replies show them: llama-server's `timings`."""

from __future__ import annotations

import math

from app.engine.events import Timings


def test_generation_rates_count_decode_steps_not_the_free_first_token():
    """As llama-server: the first token comes from the prompt's last batch, so n tokens took
    n - 1 decode steps; the rates are computed from the times as reported (microseconds)."""
    one = Timings(prompt_n=5, prompt_ms=2.0, predicted_n=1, predicted_ms=0.0004).as_dict()
    assert one["predicted_per_second"] == 0.0 and one["predicted_per_token_ms"] == 0.0
    t = Timings(prompt_n=8, prompt_ms=4.00049, predicted_n=16, predicted_ms=30.12345).as_dict()
    assert t["predicted_ms"] == 30.123 and t["prompt_ms"] == 4.0
    assert t["predicted_per_second"] == 1e3 / 30.123 * 15
    assert t["predicted_per_token_ms"] == 30.123 / 15
    assert t["prompt_per_second"] == 1e3 / 4.0 * 8 and t["prompt_per_token_ms"] == 0.5
    nothing = Timings().as_dict()
    numbers = [v for v in nothing.values() if isinstance(v, int | float)]
    assert all(math.isfinite(v) for v in numbers)
