"""`Embedder`: all-MiniLM-L6-v2 (or another sentence-transformers model by path) on torch, no hub
access; `load_embedder` picks a backend by name (`BACKENDS`).

Vectors are float32 and L2-normalised, so inner product = cosine similarity. Loading takes
seconds: callers load it once per process, off the event loop. Every backend has a thread budget
that `set_threads` changes between calls (the ingestion worker takes both cores while the LLM
engine computes nothing, one while it does); calls run one at a time under a lock.

Backends: `torch` (fp32, the reference), `torch-int8` (torch's dynamic int8 quantization of the
linear layers, made at load time) and `onnx-int8` (ONNX Runtime on an int8 model exported and
quantized once from the same weights, rag/onnx_export.py). Vectors of different backends differ
slightly, so a collection keeps the backend that made its vectors (app/docs/library.py).
"""

from __future__ import annotations

import threading

import numpy as np

from rag.model_files import offline, packaged_model_dir

BACKENDS = ("torch", "torch-int8", "onnx-int8")
DEFAULT_BACKEND = "onnx-int8"  # chosen by bench.ingest: fastest, recall within 0.02 of fp32


class Embedder:
    """The torch backends (`torch`: fp32; `torch-int8`: dynamic int8 linear layers)."""

    def __init__(
        self,
        path: str | None = None,
        threads: int = 1,
        batch_size: int = 16,
        backend: str = "torch",
    ) -> None:
        offline()
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self._torch = torch
        self.backend = backend
        self.path = path or packaged_model_dir()
        self._model = SentenceTransformer(self.path, device="cpu", local_files_only=True)
        if backend == "torch-int8":
            first = self._model[0]
            first.model = torch.ao.quantization.quantize_dynamic(
                first.model, {torch.nn.Linear}, dtype=torch.qint8
            )
        self.dim = int(self._model.get_embedding_dimension())
        self.batch_size = batch_size
        self.threads = threads
        self._lock = threading.Lock()  # one encode at a time: torch's threads are the budget

    def set_threads(self, threads: int) -> None:
        """Threads for the next calls (torch's setting is process-wide: this is its only
        torch user)."""
        with self._lock:
            if threads != self.threads:
                self._torch.set_num_threads(threads)
                self.threads = threads

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


def load_embedder(backend: str, path: str | None = None, threads: int = 1):  # noqa: ANN201
    """An embedder of `backend` (one of BACKENDS): `Embedder` or `OnnxEmbedder`, same methods."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}: one of {', '.join(BACKENDS)}")
    if backend == "onnx-int8":
        from rag.onnx_embedder import OnnxEmbedder

        return OnnxEmbedder(path, threads)
    return Embedder(path, threads, backend=backend)
