"""What `Engine` reports about itself: plain results, no handles into its parts."""

from __future__ import annotations

from dataclasses import dataclass

from app.cache.encoder_cache import EncoderCacheStats
from app.engine.kv.prefix_reuse import ReuseStats
from mm.ggml_backends import Backends


@dataclass(slots=True)
class ModelInfo:
    """The loaded model, how the engine shares its context (`GET /v1/models`' meta) and what
    blend does on it (`GET /props`)."""

    n_ctx: int  # KV cells, all slots together
    n_ctx_train: int
    n_vocab: int
    n_slots: int
    n_ctx_request: int  # KV cells one request may use, prompt and reply
    blend_sink_tokens: int  # k: tokens blend recomputes at the start of each placed chunk
    blend_unavailable: str | None = None  # why blend is off on this model (None: on)
    blend_forced: bool = False  # on by --blend-force, past the quality gate
    # Blend against full prefill on the quality set at k (app/engine/blend/blend_gate.py; None: not
    # measured).
    blend_agreement: dict[str, float | int] | None = None
    # What llama.cpp computes with: the CPU variant and its features, any GPU (`GET /props`).
    compute: Backends | None = None


@dataclass(slots=True)
class CacheStats:
    """The prefix cache's tiers and, with a projector, the vision-encoder cache (else None)."""

    tiers: ReuseStats
    encoder: EncoderCacheStats | None
