"""Retrieval: vector hits, optionally fused with BM25 hits by reciprocal rank fusion.

`score_threshold` applies to the cosine similarity of the vector search (BM25 scores have no
fixed scale). With `hybrid`, a chunk's score is its RRF score, sum of 1 / (RRF_K + rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag.bm25 import Bm25Index
from rag.index import VectorIndex

RRF_K = 60  # the constant of Cormack et al.'s reciprocal rank fusion


@dataclass(slots=True)
class Hit:
    chunk_id: int
    score: float


def rrf(rankings: list[list[int]], k: int = RRF_K) -> list[Hit]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    # Ties broken by chunk id: the same inputs always give the same list.
    return [Hit(c, s) for c, s in sorted(scores.items(), key=lambda cs: (-cs[1], cs[0]))]


def retrieve(
    index: VectorIndex,
    query_vector: np.ndarray,
    top_k: int,
    *,
    score_threshold: float | None = None,
    allowed: set[int] | None = None,
    bm25: Bm25Index | None = None,
    query_text: str = "",
) -> list[Hit]:
    """The best `top_k` chunks, best first (`allowed`: only these chunk ids)."""
    depth = top_k if bm25 is None else max(top_k * 4, 20)  # fusion looks deeper than it returns
    dense = index.search(query_vector, depth, allowed)
    if score_threshold is not None:
        dense = [(c, s) for c, s in dense if s >= score_threshold]
    if bm25 is None:
        return [Hit(c, s) for c, s in dense[:top_k]]
    sparse = bm25.search(query_text, depth, allowed)
    return rrf([[c for c, _ in dense], [c for c, _ in sparse]])[:top_k]
