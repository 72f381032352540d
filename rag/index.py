"""`VectorIndex`: one collection's chunk vectors in FAISS, by chunk id; exact inner product.

The database holds the vectors; this file is a cache of them. `load` refuses a file whose ids
differ from the database's (stale) or that FAISS cannot read (damaged), and the caller rebuilds
it from the vectors. Exact search only: at the sizes this server meets (thousands of chunks per
collection) a flat scan takes well under a millisecond per thousand vectors.
"""

from __future__ import annotations

import os
from pathlib import Path

import faiss
import numpy as np


class VectorIndex:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))

    @classmethod
    def build(cls, dim: int, ids: list[int], vectors: np.ndarray) -> VectorIndex:
        index = cls(dim)
        index.add(ids, vectors)
        return index

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def ids(self) -> set[int]:
        return set(faiss.vector_to_array(self._index.id_map).tolist())

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        if len(ids):
            vecs = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
            self._index.add_with_ids(vecs, np.asarray(ids, dtype=np.int64))

    def remove(self, ids: list[int]) -> None:
        if ids:
            self._index.remove_ids(np.asarray(ids, dtype=np.int64))

    def search(
        self, query: np.ndarray, k: int, allowed: set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Up to k (chunk id, score) pairs, best first; only ids in `allowed` when given."""
        n = len(self)
        if n == 0 or k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        params = None
        if allowed is not None:
            if not allowed:
                return []
            selector = faiss.IDSelectorBatch(np.asarray(sorted(allowed), dtype=np.int64))
            params = faiss.SearchParameters(sel=selector)
        scores, ids = self._index.search(q, min(k, n), params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def vectors(self) -> dict[int, np.ndarray]:
        ids = faiss.vector_to_array(self._index.id_map)
        return {int(i): self._index.reconstruct(int(i)) for i in ids}

    def save(self, path: Path) -> None:
        """Atomically: a crash never leaves half a file under the name."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        faiss.write_index(self._index, str(tmp))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, dim: int, expected_ids: set[int]) -> VectorIndex | None:
        """The saved index, or None if it is missing, damaged or not of exactly these ids."""
        try:
            raw = faiss.read_index(str(path))
        except (RuntimeError, OSError):
            return None
        if raw.d != dim or not isinstance(raw, faiss.IndexIDMap2):
            return None
        index = cls(dim)
        index._index = raw
        if len(index) != len(expected_ids) or index.ids() != expected_ids:
            return None
        return index
