"""Background batches are sized from the measured rate to take at most the budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.engine.background_pacer import MIN_TOKENS, BackgroundPacer


def test_the_first_batch_is_small_until_a_rate_is_measured():
    pacer = BackgroundPacer(budget_s=0.05, capacity=512)
    assert pacer.tokens() == MIN_TOKENS
    pacer.observe(8, 0.04)  # 200 tokens/s
    assert pacer.tokens() == 10  # 200 * 0.05


@given(
    budget=st.floats(0.001, 1.0),
    capacity=st.integers(1, 4096),
    batches=st.lists(
        st.tuples(st.integers(0, 4096), st.floats(0.0, 10.0, allow_nan=False)), max_size=20
    ),
)
def test_a_batch_is_never_empty_and_never_over_capacity(budget, capacity, batches):
    pacer = BackgroundPacer(budget, capacity)
    for n, seconds in batches:
        pacer.observe(n, seconds)
        assert 1 <= pacer.tokens() <= capacity


@given(rate=st.floats(50.0, 100_000.0), budget=st.floats(0.01, 0.2))
def test_at_a_steady_rate_a_batch_takes_about_the_budget(rate, budget):
    pacer = BackgroundPacer(budget, capacity=1 << 20)
    for _ in range(30):
        n = pacer.tokens()
        pacer.observe(n, n / rate)
    expected = max(MIN_TOKENS, int(rate * budget))
    assert abs(pacer.tokens() - expected) <= max(1, expected // 100)


def test_a_slower_batch_shrinks_the_next_at_once_and_a_faster_one_grows_it_gradually():
    pacer = BackgroundPacer(budget_s=0.05, capacity=512)
    pacer.observe(100, 0.05)  # 2,000 tokens/s: 100 tokens a batch
    assert pacer.tokens() == 100
    pacer.observe(100, 0.2)  # the cores got busy: 500 tokens/s
    assert pacer.tokens() == 25  # within the budget at the slower rate
    pacer.observe(25, 0.0125)  # fast again: 2,000 tokens/s
    assert 25 < pacer.tokens() < 100
