"""llama-server's memory and thread flags reach llama.cpp (CPU build: nothing is offloaded)."""

from __future__ import annotations

import llama_cpp
import pytest

from app.engine.engine_config import EngineConfig
from app.engine.llama.llama_params import gpu_offload_supported
from app.engine.llama.model import Model, ModelError


def kv_bytes_per_token(model_path: str, **kv: str) -> float:
    """State bytes per token of a 200-token sequence minus a 100-token one (headers cancel)."""
    model = Model(EngineConfig(model_path=model_path, n_ctx=512, n_parallel=2, **kv))
    try:
        sizes = []
        for seq, n in ((0, 100), (1, 200)):
            batch = model.new_batch()
            for i in range(n):
                batch.add(1 + i % 50, i, seq, False)
            assert model.decode(batch) == 0
            batch.close()
            sizes.append(model.state_size(seq))
        return (sizes[1] - sizes[0]) / 100
    finally:
        model.close()


def test_a_q8_0_kv_cache_about_halves_the_bytes_of_each_cached_token(model_path: str):
    f16 = kv_bytes_per_token(model_path)
    q8 = kv_bytes_per_token(model_path, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn="on")
    assert q8 / f16 == pytest.approx(34 / 64, rel=0.02)  # q8_0: 34 bytes per 32 values


def test_threads_and_gpu_layers_reach_the_context(model_path: str):
    model = Model(EngineConfig(model_path=model_path, n_ctx=256, n_threads=2, n_threads_batch=1))
    try:
        assert llama_cpp.llama_n_threads(model.ctx) == 2
        assert llama_cpp.llama_n_threads_batch(model.ctx) == 1
        # -ngl defaults to every layer on a GPU build and to none on this CPU-only one.
        assert model.n_gpu_layers == (999 if gpu_offload_supported() else 0)
    finally:
        model.close()


def test_a_quantized_v_cache_without_flash_attention_is_refused_with_the_reason(model_path: str):
    with pytest.raises(ModelError, match="flash attention"):
        Model(EngineConfig(model_path=model_path, n_ctx=256, cache_type_v="q8_0", flash_attn="off"))
