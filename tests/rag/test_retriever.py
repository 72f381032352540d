"""`rrf` (reciprocal rank fusion) and `retrieve` at unit level: hypothesis over rankings, and
small fake indexes that record what they were asked. The real path (a collection searched with
`hybrid` through the API) is in tests/app/api/kvchat/test_document_routes.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag.bm25 import Bm25Index
from rag.index import VectorIndex
from rag.retriever import RRF_K, Hit, retrieve, rrf

ranking = st.lists(st.integers(0, 30), unique=True, max_size=12)


@given(st.lists(ranking, max_size=4), st.integers(1, 100))
def test_rrf_scores_each_chunk_by_its_ranks_and_orders_by_score_then_id(rankings, k):
    hits = rrf(rankings, k)
    union = {c for r in rankings for c in r}
    assert sorted(h.chunk_id for h in hits) == sorted(union)  # each chunk once
    for h in hits:
        expected = sum(1.0 / (k + r.index(h.chunk_id) + 1) for r in rankings if h.chunk_id in r)
        assert h.score == pytest.approx(expected, rel=1e-12)
    keys = [(-h.score, h.chunk_id) for h in hits]
    assert keys == sorted(keys)


@given(ranking)
def test_one_ranking_keeps_its_order(r):
    assert [h.chunk_id for h in rrf([r])] == r


@given(ranking, ranking)
def test_the_order_of_the_rankings_does_not_matter(a, b):
    assert rrf([a, b]) == rrf([b, a])


def test_agreement_beats_one_first_place():
    # 9 is first in one list only; 5 is second in both: 2/(K+2) > 1/(K+1)
    hits = rrf([[9, 5, 1], [7, 5, 1]])
    assert hits[0].chunk_id == 5
    assert hits[0].score == pytest.approx(2 / (RRF_K + 2))
    # 1 is third in both (2/(K+3)); 7 and 9 tie (1/(K+1)): by chunk id
    assert [h.chunk_id for h in hits] == [5, 1, 7, 9]


class FakeIndex:
    """Dense hits in a fixed order; records the depth and filter it was asked for."""

    def __init__(self, hits: list[tuple[int, float]]) -> None:
        self.hits = hits
        self.asked: list[tuple[int, set[int] | None]] = []

    def search(
        self, vector: np.ndarray, k: int, allowed: set[int] | None = None
    ) -> list[tuple[int, float]]:
        self.asked.append((k, allowed))
        return [(c, s) for c, s in self.hits if allowed is None or c in allowed][:k]


class FakeBm25(FakeIndex):
    def search(  # type: ignore[override]
        self, query: str, k: int, allowed: set[int] | None = None
    ) -> list[tuple[int, float]]:
        assert query == "the question"
        return super().search(np.zeros(1), k, allowed)


DENSE = [(c, 0.9 - c / 100) for c in range(40)]  # chunk c has cosine 0.9 - c/100


def test_without_bm25_the_best_dense_hits_come_with_their_cosine():
    index = FakeIndex(DENSE)
    hits = retrieve(index, np.zeros(1), 3, allowed={1, 2, 3, 4})
    assert hits == [Hit(1, 0.89), Hit(2, 0.88), Hit(3, 0.87)]
    assert index.asked == [(3, {1, 2, 3, 4})]
    assert [h.chunk_id for h in retrieve(index, np.zeros(1), 10, score_threshold=0.845)] == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]


@pytest.mark.parametrize(("top_k", "depth"), [(1, 20), (5, 20), (6, 24)])
def test_fusion_looks_deeper_than_it_returns(top_k: int, depth: int):
    index, bm25 = FakeIndex(DENSE), FakeBm25([(35, 12.0), (2, 3.0)])
    hits = retrieve(index, np.zeros(1), top_k, bm25=bm25, query_text="the question")
    assert index.asked == [(depth, None)] and bm25.asked == [(depth, None)]
    assert len(hits) == top_k
    assert hits[0].chunk_id == 2  # third of the dense hits, second of the keyword hits
    assert hits[0].score == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 2))


def test_the_threshold_drops_weak_dense_hits_before_fusion_and_bm25_gets_the_filter():
    index, bm25 = FakeIndex(DENSE), FakeBm25([(30, 5.0), (31, 4.0), (0, 1.0)])
    allowed = {0, 1, 30, 31}
    hits = retrieve(
        index,
        np.zeros(1),
        10,
        score_threshold=0.885,
        allowed=allowed,
        bm25=bm25,
        query_text="the question",
    )
    assert bm25.asked == [(40, allowed)]
    # dense: 0 (0.90) and 1 (0.89) pass the threshold; 30 and 31 come from keywords only.
    assert [h.chunk_id for h in hits] == [0, 30, 1, 31]
    assert hits[0].score == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 3))


def test_hybrid_search_over_real_indexes_finds_the_keyword_match_dense_search_misses():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(4, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [10, 11, 12, 13]
    texts = ["apples and pears", "the F-1 engine burned kerosene", "rain on the harbour", "tea"]
    index, bm25 = VectorIndex.build(8, ids, vectors), Bm25Index(ids, texts)
    query = vectors[0]  # dense search alone puts chunk 10 first
    assert retrieve(index, query, 1)[0].chunk_id == 10
    fused = retrieve(index, query, 4, bm25=bm25, query_text="kerosene engine")
    assert [h.chunk_id for h in fused[:2]] == [11, 10]  # both lists' first before one's
