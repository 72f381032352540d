"""bench.workloads.ingest_quality's question sets and scores (no embedder: made-up vectors)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from bench.workloads.ingest_quality import generated, real_text, scores


@given(st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=10**6))
def test_every_generated_question_has_the_chunk_holding_its_fact(n_docs: int, seed: int):
    chunks, questions, relevant = generated(n_docs, random.Random(seed))
    assert len(questions) == len(relevant) == n_docs
    for d, want in enumerate(relevant):
        assert want, questions[d]
        assert all(f"in district {d} is " in chunks[i] for i in want)


def test_real_text_questions_are_sentences_of_their_chunks():
    chunks, questions, relevant = real_text(10, random.Random(1))
    assert len(questions) == 10
    for q, want in zip(questions, relevant, strict=True):
        assert want and all(q in chunks[i] for i in want)


def test_scores_are_recall_at_4_and_mean_reciprocal_rank():
    vectors = np.eye(6, dtype=np.float32)
    # Query 0 ranks chunk 0 first; query 1 ranks chunk 5 sixth (it points at chunks 0..4).
    queries = np.array([[1, 0, 0, 0, 0, 0], [5, 4, 3, 2, 1, 0]], dtype=np.float32)
    recall, mrr = scores(vectors, queries, [{0}, {5}])
    assert recall == 0.5
    assert mrr == (1.0 + 1 / 6) / 2
