"""A second model with the packaged model's tokenizer: SmolLM2's metadata and vocabulary, the
`tiny` shape and random weights (bench/gpu/random_model.py), made once under
~/.cache/kvchat/models (about a second).

Tests and benches that need two models use it: the same prompt tokenizes to the same tokens on
both, while their KV differs, so a cache key without the model's identity in it would hand one
model's KV to the other (the router, a disk tier shared by two models).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

CACHE = Path.home() / ".cache" / "kvchat" / "models"
NAME = "smollm2-tokenizer-tiny-random-q4_1.gguf"


def twin_model(cache: Path = CACHE) -> Path:
    """The twin's GGUF path, made on first use (atomically: parallel test workers may ask)."""
    out = cache / NAME
    if out.exists():
        return out
    from app.config_derived import packaged_model_path
    from bench.gpu import random_model
    from bench.gpu.kit import llm_skeleton

    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        meta = Path(tmp) / "meta.gguf"
        llm_skeleton(packaged_model_path(), meta)
        made = random_model.make(meta, Path(tmp) / NAME, "tiny", "q4_1")
        os.replace(made, out)
    return out
