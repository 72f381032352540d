"""`Bm25Index` (keyword search by chunk id) with hypothesis over small collections; the hybrid
search through the API is in tests/app/api/kvchat/test_document_routes.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.bm25 import Bm25Index

WORDS = ["otter", "teal", "lisbon", "harbour", "rocket", "kerosene", "engine", "pebble"]
texts = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join), min_size=1, max_size=8
)
queries = st.lists(st.sampled_from([*WORDS, "the", "of"]), min_size=1, max_size=3).map(" ".join)


def collection(docs: list[str]) -> Bm25Index:
    return Bm25Index([100 + 7 * i for i in range(len(docs))], docs)  # ids are not positions


@settings(max_examples=60, deadline=None)
@given(texts, queries, st.integers(1, 10), st.data())
def test_hits_match_a_query_word_best_first_and_the_filter_applies_before_k(docs, query, k, data):
    index = collection(docs)
    ids = [100 + 7 * i for i in range(len(docs))]
    everything = index.search(query, len(docs))
    hits = index.search(query, k)
    assert hits == everything[:k]
    scores = [s for _, s in everything]
    assert all(s > 0 for s in scores) and scores == sorted(scores, reverse=True)
    words = set(query.split())
    matching = {ids[i] for i, d in enumerate(docs) if words & set(d.split())}
    assert {c for c, _ in everything} == matching  # every chunk with a query word, no other
    allowed = data.draw(st.sets(st.sampled_from(ids)))
    assert index.search(query, k, allowed) == [h for h in everything if h[0] in allowed][:k]


def test_more_occurrences_of_a_rare_word_rank_higher():
    index = collection(["rocket engine", "rocket rocket engine", "harbour engine", "pebble pebble"])
    assert [c for c, _ in index.search("rocket", 5)] == [107, 100]


def test_nothing_to_search_gives_nothing():
    assert Bm25Index([], []).search("otter", 3) == []
    index = collection(["teal otter", "lisbon"])
    assert index.search("the of and", 3) == []  # stopwords only
    assert index.search("", 3) == []
    assert index.search("otter", 0) == []
    assert index.search("zebra", 3) == []  # no chunk has the word


def test_stopwords_neither_match_nor_lengthen_a_chunk():
    index = collection(["the the the of the otter", "otter pebble"])
    # Without its stopwords the first chunk is the shorter one: it ranks first.
    assert [c for c, _ in index.search("the otter", 5)] == [100, 107]
    assert index.search("the", 5) == []
