"""The onnx-int8 backend against torch fp32 on the same packaged weights."""

from __future__ import annotations

import numpy as np
import pytest

from rag.embedder import BACKENDS, load_embedder
from rag.onnx_embedder import STOP_SPINNING

TEXTS = [
    "kv cache reuse",
    "Mount Etna is an active volcano in Sicily; its eruptions send lava down its slopes.",
    "word " * 400,  # longer than the model reads: truncated as sentence-transformers does
]


@pytest.fixture(scope="module")
def fp32():
    return load_embedder("torch")


def test_onnx_int8_vectors_are_normalised_and_close_to_fp32(fp32):
    onnx = load_embedder("onnx-int8")
    got, want = onnx.embed(TEXTS), fp32.embed(TEXTS)
    assert got.shape == want.shape == (3, 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert (got * want).sum(axis=1).min() > 0.95
    # Batched texts of different lengths (padding) embed as they do alone.
    alone = np.stack([onnx.embed([t])[0] for t in TEXTS])
    assert np.allclose(got, alone, atol=1e-4)
    assert onnx.token_counts(TEXTS) == fp32.token_counts(TEXTS)
    assert onnx.max_tokens == fp32.max_tokens == 256


def test_thread_counts_switch_without_changing_vectors():
    onnx = load_embedder("onnx-int8", threads=2)
    two = onnx.embed(TEXTS[:2])
    onnx.set_threads(1)
    assert onnx.threads == 1
    assert np.allclose(onnx.embed(TEXTS[:2]), two, atol=1e-5)


def test_a_query_runs_on_one_thread_and_no_thread_spins_after_a_run():
    """A spinning pool thread would take a core from the decode that follows a query's
    embedding (the module's doc): a query gets a session of one thread whatever the count set
    for documents, and every session's threads stop spinning when a run returns."""
    onnx = load_embedder("onnx-int8", threads=2)
    assert list(onnx._sessions) == [2]  # noqa: SLF001 (white-box test of the unit's state)
    query = onnx.embed_query(TEXTS[1])
    assert sorted(onnx._sessions) == [1, 2] and onnx.threads == 2  # noqa: SLF001 (white-box)
    assert query.shape == (384,) and np.allclose(query, onnx.embed([TEXTS[1]])[0], atol=1e-5)
    for session in onnx._sessions.values():  # noqa: SLF001 (white-box test of the unit's state)
        assert session.get_session_options().get_session_config_entry(STOP_SPINNING) == "1"


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="one of " + ", ".join(BACKENDS)):
        load_embedder("gpu-magic")
