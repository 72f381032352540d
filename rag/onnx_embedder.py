"""`OnnxEmbedder`: the `onnx-int8` backend, same methods as `Embedder` (rag/embedder.py).

The transformer runs in ONNX Runtime on the int8 model of rag/onnx_export.py; tokenization is the
model's own `tokenizer.json` (Hugging Face tokenizers, truncated at the model's max_seq_length as
sentence-transformers does); mean pooling over the attention mask and L2 normalisation in numpy,
as the model's sentence-transformers modules do.

Each text is run alone: dynamic int8 quantization scales activations per tensor, so in a padded
batch a text's vector would depend on the texts beside it. Alone, a text always gets the same
vector (a query as much as a chunk), and no padding is computed; throughput is about the same.

A query is embedded just before its prompt is computed, on the same cores. ONNX Runtime's pool
threads spin for work after a run by default, and a spinning thread takes one of the cores that
decode (the request's first token) runs on. So a query runs on a session of one thread (no pool
thread; a short text is embedded as fast as on two), and the other sessions' threads stop
spinning as each run returns: they still spin between a run's operators, which is where spinning
pays (figures: docs/documents.md).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from rag.model_files import packaged_model_dir
from rag.onnx_export import exported_model

STOP_SPINNING = "session.force_spinning_stop"  # ONNX Runtime's session config key
QUERY_THREADS = 1


def _mean_pooling_only(model_dir: Path) -> None:
    pooling = model_dir / "1_Pooling" / "config.json"
    if pooling.is_file():
        modes = json.loads(pooling.read_text())
        used = [k for k, v in modes.items() if k.startswith("pooling_mode_") and v]
        if used != ["pooling_mode_mean_tokens"]:
            raise ValueError(f"the onnx-int8 backend does mean pooling only; this model: {used}")


class OnnxEmbedder:
    backend = "onnx-int8"

    def __init__(self, path: str | None = None, threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.path = path or packaged_model_dir()
        folder = Path(self.path)
        _mean_pooling_only(folder)
        config = json.loads((folder / "sentence_bert_config.json").read_text())
        self._max = int(config.get("max_seq_length", 256))
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(self._max)
        self._tokenizer.no_padding()  # tokenizer.json may pad to a fixed width: we pad per batch
        self._counter = Tokenizer.from_file(str(folder / "tokenizer.json"))  # no truncation
        self._counter.no_truncation()
        self._counter.no_padding()
        self._ort = ort
        self._file = str(exported_model(path))
        self._lock = threading.Lock()
        self.threads = threads
        self._sessions = {threads: self._open(threads)}  # by thread count, opened when first used
        self.dim = int(self.embed(["x"]).shape[1])

    def _open(self, threads: int):  # noqa: ANN202 (an InferenceSession)
        options = self._ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry(STOP_SPINNING, "1")  # see the module's doc
        return self._ort.InferenceSession(self._file, options, providers=["CPUExecutionProvider"])

    def _session(self, threads: int):  # noqa: ANN202 (an InferenceSession)
        """ONNX Runtime fixes a session's threads when it opens: one session per count, kept.
        Under the lock."""
        if threads not in self._sessions:
            self._sessions[threads] = self._open(threads)
        return self._sessions[threads]

    def set_threads(self, threads: int) -> None:
        with self._lock:
            self._session(threads)
            self.threads = threads

    def _batch(self, texts: list[str], threads: int) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session(threads).run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of norm 1."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            rows = [self._batch([text], self.threads)[0] for text in texts]
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)

    @property
    def max_tokens(self) -> int:
        return self._max

    def token_counts(self, texts: list[str]) -> list[int]:
        with self._lock:
            return [len(e.ids) for e in self._counter.encode_batch(texts)]

    def embed_query(self, text: str) -> np.ndarray:
        """One text on one thread (see the module's doc)."""
        with self._lock:
            return np.ascontiguousarray(self._batch([text], QUERY_THREADS)[0], dtype=np.float32)
