from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.chat.sessions.turn_cache import TurnCache


def test_longest_remembered_prefix_wins():
    cache = TurnCache()
    cache.remember("", "<s>a", [1, 2])
    cache.remember("", "<s>a reply b", [1, 2, 3, 4])
    cache.remember("", "<s>other", [9])
    assert cache.longest("", "<s>a reply b and more") == ("<s>a reply b", [1, 2, 3, 4])
    assert cache.longest("", "<s>a different") == ("<s>a", [1, 2])
    assert cache.longest("", "<t>") is None


def test_salts_are_isolated():
    cache = TurnCache()
    cache.remember("tenant-a", "<s>hello", [1, 2])
    assert cache.longest("tenant-b", "<s>hello there") is None
    assert cache.longest("", "<s>hello there") is None
    assert cache.longest("tenant-a", "<s>hello there") == ("<s>hello", [1, 2])


def test_least_recently_used_entry_goes_first():
    cache = TurnCache(max_entries=2)
    cache.remember("", "a", [1])
    cache.remember("", "b", [2])
    assert cache.longest("", "a!") is not None  # a is now more recent than b
    cache.remember("", "c", [3])
    assert len(cache) == 2
    assert cache.longest("", "b!") is None
    assert cache.longest("", "a!") == ("a", [1])


@given(
    st.lists(st.tuples(st.sampled_from(["", "x"]), st.text("ab", max_size=6)), max_size=12),
    st.sampled_from(["", "x"]),
    st.text("ab", max_size=8),
)
def test_matches_a_brute_force_search(entries, salt, text):
    cache = TurnCache(max_entries=100)
    kept: dict[tuple[str, str], list[int]] = {}
    for i, (s, t) in enumerate(entries):
        cache.remember(s, t, [i])
        if t:
            kept[(s, t)] = [i]
    found = cache.longest(salt, text)
    candidates = [(t, ids) for (s, t), ids in kept.items() if s == salt and text.startswith(t)]
    if not candidates:
        assert found is None
    else:
        assert found == max(candidates, key=lambda c: len(c[0]))


def test_the_same_prompt_again_skips_the_tokenizer():
    calls: list[tuple[str, str]] = []

    def extend(tokens: list[int], done: str, text: str) -> list[int]:
        calls.append((done, text))
        return [*tokens, *(ord(c) for c in text[len(done) :])]

    cache = TurnCache()
    first = cache.tokens_of("", "<s>ab", extend)
    assert cache.tokens_of("", "<s>ab", extend) == first  # no call: remembered
    assert calls == [("", "<s>ab")]
    longer = cache.tokens_of("", "<s>abc", extend)  # only the rest is tokenized
    assert calls[-1] == ("<s>ab", "<s>abc") and longer == [*first, ord("c")]
    assert cache.tokens_of("t", "<s>ab", extend) == first and len(calls) == 3  # salted
