"""Plain engine configuration: what the engine needs, nothing read from the environment.

`app.config.Settings` (the only reader of environment variables and CLI flags) builds this.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class EngineConfig:
    model_path: str
    n_ctx: int = 8192  # total KV cells, shared by all slots (unified KV)
    n_parallel: int = 4  # slots == KV sequences
    n_threads: int = 2  # generation (one token per slot per step)
    n_threads_batch: int | None = None  # prompt processing; None = n_threads (llama-server's -tb)
    # Layers offloaded to a GPU: -1 = all when the build has a GPU backend, else none.
    n_gpu_layers: int = -1
    # The CPU backend's variant by name (mm/ggml_backends.py); "auto": the best this CPU runs.
    cpu_variant: str = "auto"
    flash_attn: str = "auto"  # on | off | auto (llama.cpp decides per device)
    cache_type_k: str = "f16"  # KV cache types: q8_0 halves the bytes of each cached token
    cache_type_v: str = "f16"
    use_mmap: bool = True
    use_mlock: bool = False
    n_batch: int = 512  # max tokens put into one llama_decode
    n_ubatch: int = 512
    cache_prompt: bool = True  # server default for requests that do not say
    slot_prompt_similarity: float = 0.1  # min LCP / prompt length to prefer a slot by its cache
    seed: int = -1  # default sampling seed; -1 = random per request
    temperature: float = 0.8  # for requests that give none (SamplingParams.temperature None)
    # Seconds a slot stays idle before its conversation's predictable continuation is
    # prefilled: a quick follow-up (a retry, a different prompt) must not wait for that work.
    idle_prefill_delay: float = 0.25
    # Longest an idle engine waits for requests received but not yet submitted before it
    # prefills, so a burst is prefilled in one batch (app/engine/core/arrivals.py); 0 = never.
    burst_wait: float = 0.02
    # Longest one llama_decode of background work (a document's prefill, an idle slot's
    # next-turn boundary) should take: a client request arriving meanwhile waits for it to end
    # (app/engine/background_pacer.py sizes the batches from the measured rate).
    background_batch_ms: float = 50.0
    # Compact the KV when cuts may have freed more than this share of its cells under cells in
    # use (llama-server's --defrag-thold; < 0: never): app/engine/kv/kv_compactor.py.
    defrag_thold: float = 0.1
    cache_ram_bytes: int = 2048 << 20  # host-memory prompt cache budget; 0 disables it
    cache_ram_tokens: int | None = None  # optional budget in tokens
    # Host-cache eviction: "gdsf" served more prompt tokens than "lru" in bench/eviction.py
    # (figures: docs/kv-reuse.md, Measurements).
    cache_policy: str = "gdsf"
    cache_dir: str | None = None  # disk tier: saved states survive a restart
    cache_disk_bytes: int = 0  # disk tier budget; 0 = no limit
    # The disk tier's directory is shared by replicas (app/cache/disk_journal.py); the journal
    # name is this replica's, so a restart takes over its own journal.
    cache_shared: bool = False
    cache_journal: str = "kvchat"
    cache_reuse: int = 0  # min run to reuse by KV shifting (--cache-reuse); 0 = off
    # Blend (app/engine/blend/chunk_blend.py): tokens recomputed at the start of each placed chunk;
    # < 0: the model's measured default. Blend past the model's quality gate (app/engine/
    # blend/blend_gate.py): on where its answers were not measured close enough to full prefill's.
    blend_sink_tokens: int = -1
    blend_force: bool = False
    # Speculative decoding (app/engine/speculation/speculator.py): draft source, n-gram size, most
    # draft tokens one step carries (all slots together), shortest draft worth verifying, replies
    # kept per document as a draft source.
    spec_type: str = "none"
    spec_ngram_size_n: int = 3
    spec_draft_n_max: int = 16
    spec_draft_n_min: int = 0
    spec_replies: int = 8
    spec_draft_cost: float = -1.0  # a draft token's cost in generated tokens' worth; < 0: measured
    park_idle_slots: bool = False  # --cache-idle-slots (the server turns it on): idle KV to host
    # Sliding-window models: keep every position's KV in the SWA layers too, so any cached prefix
    # stays reusable, at the cost of more KV memory (docs/kv-reuse.md). Without it,
    # only prefixes whose window is still held are reused.
    swa_full: bool = True
    # Generation limits (llama-server's -n/--n-predict and per-slot n_ctx): n_predict is the
    # default max_tokens (-1 = none), max_tokens_limit its hard cap (ours; -1 = none);
    # n_ctx_request caps one request's prompt plus reply in KV cells (0 = n_ctx // n_parallel),
    # so one request cannot fill the shared KV and evict every other slot's cache.
    n_predict: int = -1
    max_tokens_limit: int = -1
    n_ctx_request: int = 0
    kv_unified: bool = False  # n_ctx_request 0 means all of n_ctx, as llama-server's unified KV
    max_queue: int = 64  # waiting requests beyond this are refused (503); 0 = no bound
    request_timeout: float = 600.0  # seconds from submission; 0 = no limit
    mmproj_path: str | None = None  # multimodal projector (mtmd); None: text only
    encoder_cache_bytes: int = 256 << 20  # vision-encoder outputs kept by image id; 0 = off
    warmup: bool = True
    # Seconds idle before the model is freed, its slots' KV kept in the cache tiers; it loads
    # again for the next work (app/engine/core/model_sleep.py). <= 0: never.
    sleep_idle_seconds: float = -1.0
    verbose: bool = False  # llama.cpp's own log lines
