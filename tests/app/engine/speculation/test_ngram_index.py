"""NgramIndex: a proposal is what followed the earlier occurrence of the history's tail that
agrees with the history furthest back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.engine.speculation.ngram_index import SCAN, NgramIndex

tokens = st.lists(st.integers(min_value=0, max_value=5), max_size=60)


def shared_run(history: list[int], end: int, most: int) -> int:
    """Brute force: how many tokens before `end` equal the end of `history` (up to most)."""
    length, limit = 0, min(most, end, len(history))
    while length < limit and history[end - length - 1] == history[-length - 1]:
        length += 1
    return length


def best_earlier_end(history: list[int], n: int, m: int, most: int) -> int | None:
    """Brute force: of the latest SCAN earlier occurrences of the tail (other than the tail),
    the end of the one that agrees furthest back, then drafts more, then is latest."""
    tail = history[-n:]
    ends = [e for e in range(n, len(history)) if history[e - n : e] == tail][-SCAN:]
    if not ends:
        return None
    score = {e: (shared_run(history, e, most), min(m, len(history) - e), e) for e in ends}
    return max(ends, key=score.__getitem__)


@given(
    tokens,
    tokens,
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=1, max_value=12),
)
def test_a_match_follows_the_occurrence_that_agrees_furthest_back(
    first: list[int], more: list[int], n: int, m: int, most: int
):
    index = NgramIndex(n, first)
    index.extend(more)  # built in two parts: the same as at once
    history = first + more
    end = best_earlier_end(history, n, m, most) if len(history) >= n else None
    draft, length = index.match(index.tokens, m, most)
    if end is None:
        assert (draft, length) == ([], 0)
    else:
        assert draft == history[end : end + m]
        assert length == max(n, shared_run(history, end, most))


def test_of_two_occurrences_the_quoted_passage_drafts_not_the_latest():
    passage = [1, 2, 3, 4, 5, 6, 7]
    history = [*passage, 0, 5, 6, 7, 9, 9, 1, 2, 3, 4, 5, 6, 7]  # quoting the passage
    index = NgramIndex(3, history)
    assert index.match(index.tokens, 2, 16) == ([0, 5], 7)  # not [9, 9] after the later "5 6 7"


def test_an_occurrence_with_nothing_after_it_gives_way_to_one_with_a_draft():
    reply = NgramIndex(2, [4, 5, 1, 2, 3, 4, 5])
    reply.seal()
    assert reply.match([2, 3, 4, 5], 2, 16) == ([1, 2], 2)  # the tail agrees longer, drafts none


@given(tokens, st.integers(min_value=1, max_value=4))
def test_a_sealed_index_finds_its_own_tail(history: list[int], n: int):
    index = NgramIndex(n, history)
    index.seal()
    if len(history) >= n:
        tail = history[-n:]
        once = not any(history[e - n : e] == tail for e in range(n, len(history)))
        draft, length = index.match(history, 4, 16)
        if once:  # only at the very end: nothing follows it
            assert draft == []
        else:  # an earlier occurrence drafts what followed it
            assert draft and length >= n


def test_media_placeholders_never_match():
    index = NgramIndex(2, [-1, -1, 7, -1, -1])
    assert index.match([-1, -1], 3, 2)[0] == []


def test_a_quote_is_proposed():
    index = NgramIndex(3, [1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3])
    assert index.match(index.tokens, 3, 3)[0] == [4, 5, 6]
    index.extend([4])
    assert index.match(index.tokens, 8, 3)[0] == [5, 6, 9, 9, 1, 2, 3, 4]


def test_a_past_reply_matches_a_new_history_as_far_back_as_they_agree():
    reply = NgramIndex(3, [5, 6, 7, 8, 9, 10, 11])
    reply.seal()
    assert reply.match([1, 2, 6, 7, 8], 2, 16) == ([9, 10], 3)
    assert reply.match([1, 5, 6, 7, 8], 2, 16) == ([9, 10], 4)  # back to the reply's start
    assert reply.match([1, 5, 6, 7, 8], 2, 3) == ([9, 10], 3)  # at most `most`
    assert reply.match([7, 7, 7], 2, 16) == ([], 0)
