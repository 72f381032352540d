"""`open_vocabulary`: a model's vocabulary loaded without an engine, for tools that only count
tokens (`python -m app docs ingest`), so that they need no part of the engine."""

from __future__ import annotations

from typing import Protocol

from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model
from app.engine.tokenizer import Tokenizer


class Vocabulary(Tokenizer, Protocol):
    def close(self) -> None: ...  # frees the model: nothing may be read afterwards


def open_vocabulary(model_path: str) -> Vocabulary:
    """The model loaded with the smallest context (one sequence, no warm-up); close it when
    done."""
    return Model(EngineConfig(model_path, n_ctx=256, n_parallel=1, warmup=False))
