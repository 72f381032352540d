from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cache.host_cache import HostCache
from mm.token_sequence import TokenSequence


def seq(*tokens: int) -> TokenSequence:
    return TokenSequence(tokens)


def test_best_finds_the_longest_prefix_under_the_salt():
    cache = HostCache(budget_bytes=1000)
    cache.store("", seq(1, 2, 3, 4), b"x" * 10)
    cache.store("", seq(1, 2, 9), b"y" * 10)
    entry, n = cache.best("", seq(1, 2, 3, 7))
    assert entry.tokens == seq(1, 2, 3, 4) and n == 3
    assert cache.best("other", seq(1, 2, 3, 7)) is None


def test_an_entry_wholly_contained_in_a_new_one_is_dropped():
    cache = HostCache(budget_bytes=1000)
    cache.store("", seq(1, 2), b"a" * 10)
    cache.store("", seq(1, 2, 3), b"b" * 20)
    assert [e.tokens for e in cache.entries.values()] == [seq(1, 2, 3)]
    assert cache.bytes_used == 20 and cache.tokens_used == 3
    assert cache.covers("", seq(1, 2)) and not cache.covers("", seq(1, 2, 3, 4))


def test_least_recently_used_goes_first_and_oversized_is_refused():
    cache = HostCache(budget_bytes=30)
    a = cache.store("", seq(1), b"a" * 10)
    cache.store("", seq(2), b"b" * 10)
    cache.store("", seq(3), b"c" * 10)
    cache.touch(a)
    cache.store("", seq(4), b"d" * 10)  # evicts seq(2), the least recently used
    assert sorted(e.tokens[0] for e in cache.entries.values()) == [1, 3, 4]
    assert cache.store("", seq(5), b"e" * 31) is None
    assert cache.bytes_used == 30


@given(
    st.lists(
        st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=6), st.integers(1, 40)),
        max_size=30,
    ),
    st.integers(10, 100),
    st.one_of(st.none(), st.integers(3, 20)),
)
def test_budgets_always_hold(
    ops: list[tuple[list[int], int]], budget: int, token_budget: int | None
):
    cache = HostCache(budget_bytes=budget, budget_tokens=token_budget)
    for tokens, size in ops:
        cache.store("", TokenSequence(tokens), b"z" * size)
        assert cache.bytes_used == sum(e.n_bytes for e in cache.entries.values()) <= budget
        assert cache.tokens_used == sum(len(e.tokens) for e in cache.entries.values())
        assert token_budget is None or cache.tokens_used <= token_budget
        assert len(cache.index) == len(cache.entries)
        cache.index.check()


@pytest.mark.parametrize("policy, survives", [("lru", False), ("gdsf", True)])
def test_a_popular_entry_survives_a_burst_of_one_offs_only_under_gdsf(policy: str, survives: bool):
    cache = HostCache(budget_bytes=30, policy=policy)
    popular = cache.store("", seq(9, 9, 9), b"p" * 10)
    for _ in range(5):
        cache.touch(popular)  # asked for again and again
    for i in range(4):  # then four one-off conversations pass through
        cache.store("", seq(i), b"o" * 10)
    assert (popular.id in cache.entries) is survives


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="policy"):
        HostCache(budget_bytes=10, policy="random")


def test_forget_documents_drops_the_entries_holding_them():
    cache = HostCache(budget_bytes=1000)
    cache.store("", seq(1, 2, 3), b"a" * 10, frozenset({"doc-a"}))
    cache.store("", seq(4, 5), b"b" * 10, frozenset({"doc-b", "doc-c"}))
    cache.store("", seq(6, 7), b"c" * 10)
    assert cache.forget_documents({"doc-c"}) == 1
    assert [e.tokens for e in cache.entries.values()] == [seq(1, 2, 3), seq(6, 7)]
    assert cache.best("", seq(4, 5)) is None and cache.bytes_used == 20
