from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.layout import LayoutChunk, build

HEAD, TAIL = [1, 2, 3], [9, 9]


def chunk(doc: str, ordinal: int) -> LayoutChunk:
    number = ord(doc) * 100 + ordinal
    return LayoutChunk(number, doc, ordinal, number, (number, number + 1, 1000 + ordinal))


pool = [chunk(d, o) for d in "abcd" for o in range(3)]
subsets = st.lists(st.sampled_from(pool), min_size=1, max_size=6, unique=True)


def contains(tokens: list[int], part: tuple[int, ...]) -> bool:
    n = len(part)
    return any(tuple(tokens[i : i + n]) == part for i in range(len(tokens) - n + 1))


@settings(max_examples=100, deadline=None)
@given(subsets, st.randoms())
def test_layout_does_not_depend_on_retrieval_order(chunks: list[LayoutChunk], rnd):
    shuffled = list(chunks)
    rnd.shuffle(shuffled)
    first, second = build(HEAD, chunks, TAIL), build(HEAD, shuffled, TAIL)
    assert first.tokens == second.tokens
    assert [c.key for c in first.chunks] == sorted(c.key for c in chunks)
    # Each chunk's ids appear whole, as stored, in the prompt.
    assert all(contains(first.tokens, c.tokens) for c in chunks)
    assert first.tokens[:3] == HEAD and first.tokens[-2:] == TAIL


@settings(max_examples=100, deadline=None)
@given(subsets, subsets, st.randoms())
def test_cached_chunks_come_first_in_the_cache_order(cached: list[LayoutChunk], asked, rnd):
    held = build(HEAD, cached, []).tokens  # what a cache holds: an earlier layout

    def covered(tokens: list[int]) -> int:
        n = 0
        while n < min(len(tokens), len(held)) and tokens[n] == held[n]:
            n += 1
        return n

    shuffled = list(asked)
    rnd.shuffle(shuffled)
    layout = build(HEAD, asked, TAIL, covered)
    assert layout.tokens == build(HEAD, shuffled, TAIL, covered).tokens
    # The cached run: the longest run of the earlier layout's chunks the new set holds.
    run = []
    for c in build(HEAD, cached, []).chunks:
        if c not in asked:
            break
        run.append(c)
    assert layout.chunks[: len(run)] == run
    assert covered(layout.tokens) >= len(HEAD) + sum(len(c.tokens) for c in run)
