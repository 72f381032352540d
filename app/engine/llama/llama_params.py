"""llama-server's flags as llama.cpp's load parameters, for `Model` (app/engine/llama/model.py).

`model_params` turns -ngl (`gpu_layers`), --no-mmap and --mlock into the model's load parameters;
`context_params` turns the context, batch, thread, KV-type (-ctk/-ctv) and flash-attention (-fa)
flags into the context's.
"""

from __future__ import annotations

import llama_cpp

from app.engine.engine_config import EngineConfig

# llama-server's -ctk/-ctv choices.
KV_TYPES = {
    "f32": llama_cpp.GGML_TYPE_F32,
    "f16": llama_cpp.GGML_TYPE_F16,
    "bf16": 30,  # GGML_TYPE_BF16 (llama_cpp does not export its name)
    "q8_0": llama_cpp.GGML_TYPE_Q8_0,
    "q4_0": llama_cpp.GGML_TYPE_Q4_0,
    "q4_1": llama_cpp.GGML_TYPE_Q4_1,
    "iq4_nl": llama_cpp.GGML_TYPE_IQ4_NL,
    "q5_0": llama_cpp.GGML_TYPE_Q5_0,
    "q5_1": llama_cpp.GGML_TYPE_Q5_1,
}
FLASH_ATTN = {
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build has a GPU backend (CUDA, Vulkan, Metal, ...)."""
    return bool(llama_cpp.llama_supports_gpu_offload())


def gpu_layers(ngl: int) -> int:
    """The layers -ngl offloads: < 0 means every layer on a GPU build, none on a CPU one."""
    return (999 if gpu_offload_supported() else 0) if ngl < 0 else ngl


def model_params(config: EngineConfig, n_gpu_layers: int) -> llama_cpp.llama_model_params:
    """The offloaded layers (`gpu_layers`), --no-mmap and --mlock."""
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = n_gpu_layers
    params.load_mode = _load_mode(config.use_mmap, config.use_mlock)
    if _cpu_has_amx_kernels():
        params.use_extra_bufts = False
    return params


def context_params(config: EngineConfig, n_seq_max: int) -> llama_cpp.llama_context_params:
    """One unified KV cache for `n_seq_max` sequences; raises KeyError for a KV cache type or
    flash-attention mode llama-server does not know."""
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = config.n_ctx
    params.n_batch = config.n_batch
    params.n_ubatch = config.n_ubatch
    params.n_seq_max = n_seq_max
    params.n_threads = config.n_threads
    params.n_threads_batch = config.n_threads_batch or config.n_threads
    params.type_k = KV_TYPES[config.cache_type_k]
    params.type_v = KV_TYPES[config.cache_type_v]
    params.flash_attn_type = FLASH_ATTN[config.flash_attn]
    params.kv_unified = True
    params.swa_full = config.swa_full
    params.no_perf = True
    return params


def _cpu_has_amx_kernels() -> bool:
    # llama.cpp's AMX kernels crash inside llama_decode on this machine's CPU. The project builds
    # llama-cpp-python with AMX off; this guards against a wheel built natively by someone else.
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    return "AMX_INT8 = 1" in info


def _load_mode(use_mmap: bool, use_mlock: bool) -> int:
    # This llama.cpp folds llama-server's --no-mmap / --mlock into one load mode.
    if use_mlock:
        return llama_cpp.LLAMA_LOAD_MODE_MMAP_MLOCK if use_mmap else llama_cpp.LLAMA_LOAD_MODE_MLOCK
    return llama_cpp.LLAMA_LOAD_MODE_AUTO if use_mmap else llama_cpp.LLAMA_LOAD_MODE_NONE
