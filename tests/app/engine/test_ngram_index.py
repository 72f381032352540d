"""NgramIndex: a proposal is always what followed an earlier occurrence of the history's tail."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.engine.ngram_index import NgramIndex

tokens = st.lists(st.integers(min_value=0, max_value=5), max_size=60)


def latest_earlier_end(history: list[int], n: int) -> int | None:
    """Brute force: end index of the latest occurrence of the tail other than the tail."""
    tail = history[-n:]
    for end in range(len(history) - 1, n - 1, -1):
        if history[end - n : end] == tail:
            return end
    return None


@given(tokens, tokens, st.integers(min_value=1, max_value=4), st.integers(min_value=1, max_value=8))
def test_a_match_follows_the_latest_earlier_occurrence(
    first: list[int], more: list[int], n: int, m: int
):
    index = NgramIndex(n, first)
    index.extend(more)  # built in two parts: the same as at once
    history = first + more
    end = latest_earlier_end(history, n) if len(history) >= n else None
    want = history[end : end + m] if end is not None else []
    assert index.match(index.tokens, m, n)[0] == want


@given(tokens, st.integers(min_value=1, max_value=4))
def test_a_sealed_index_finds_its_own_tail(history: list[int], n: int):
    index = NgramIndex(n, history)
    index.seal()
    if len(history) >= n:
        assert index.match(history, 4, n)[0] == []  # nothing after the very end


def test_media_placeholders_never_match():
    index = NgramIndex(2, [-1, -1, 7, -1, -1])
    assert index.match([-1, -1], 3, 2)[0] == []


def test_a_quote_is_proposed():
    index = NgramIndex(3, [1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3])
    assert index.match(index.tokens, 3, 3)[0] == [4, 5, 6]
    index.extend([4])
    assert index.match(index.tokens, 8, 3)[0] == [5, 6, 9, 9, 1, 2, 3, 4]


def shared_run(history: list[int], end: int, most: int) -> int:
    """Brute force: how many tokens before `end` equal the end of `history` (up to most)."""
    length, limit = 0, min(most, end, len(history))
    while length < limit and history[end - length - 1] == history[-length - 1]:
        length += 1
    return length


@given(tokens, st.integers(min_value=1, max_value=4), st.integers(min_value=1, max_value=12))
def test_a_match_has_the_length_of_the_run_it_shares(history: list[int], n: int, most: int):
    index = NgramIndex(n, history)
    draft, length = index.match(index.tokens, 4, most)
    end = latest_earlier_end(history, n) if len(history) >= n else None
    if end is None:
        assert (draft, length) == ([], 0)
    else:
        assert draft == history[end : end + 4]
        assert length == max(n, shared_run(history, end, most))


def test_a_past_reply_matches_a_new_history_as_far_back_as_they_agree():
    reply = NgramIndex(3, [5, 6, 7, 8, 9, 10, 11])
    reply.seal()
    assert reply.match([1, 2, 6, 7, 8], 2, 16) == ([9, 10], 3)
    assert reply.match([1, 5, 6, 7, 8], 2, 16) == ([9, 10], 4)  # back to the reply's start
    assert reply.match([1, 5, 6, 7, 8], 2, 3) == ([9, 10], 3)  # at most `most`
    assert reply.match([7, 7, 7], 2, 16) == ([], 0)
