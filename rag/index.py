"""`VectorIndex`: one collection's chunk vectors in FAISS, by chunk id; inner product.

The database holds the vectors; the saved file is a cache of them. `load` refuses a file whose
ids differ from the database's (stale) or that FAISS cannot read (damaged), and the caller
rebuilds it from the vectors.

Search is exact (a flat scan) below `ann_min` vectors (ANN_MIN unless told, `--doc-ann-min`),
then approximate (HNSW, built in memory on top of the flat index, kept up to date on adds and
rebuilt after removals: a rebuild takes seconds per ten thousand vectors, so it pays only where
flat scans have become slow). A flat scan's time grows with the vectors (figures:
docs/documents.md, Large collections). FAISS searches on one OpenMP thread: a single query's scan
is short, and OpenMP threads that spin-wait on cores the LLM engine uses are slower than one.
"""

from __future__ import annotations

import os
from pathlib import Path

import faiss
import numpy as np

ANN_MIN = 200_000  # about where a flat scan of 384-dim vectors nears 50 ms on one core
HNSW_M = 32

faiss.omp_set_num_threads(1)  # see above; process-wide, and FAISS is its only user here


class VectorIndex:
    def __init__(self, dim: int, ann_min: int = ANN_MIN) -> None:
        self.dim = dim
        self.ann_min = ann_min
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self._ann: faiss.Index | None = None  # HNSW over the same vectors, once large

    def _approximate(self) -> faiss.Index | None:
        """The HNSW index when the collection is large enough (built on first need)."""
        if len(self) < self.ann_min:
            self._ann = None
            return None
        if self._ann is None or self._ann.ntotal != len(self):
            hnsw = faiss.IndexHNSWFlat(self.dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            ann = faiss.IndexIDMap(hnsw)
            ids = faiss.vector_to_array(self._index.id_map)
            ann.add_with_ids(self._index.index.reconstruct_n(0, len(self)), ids)
            self._ann = ann
        return self._ann

    @classmethod
    def build(
        cls, dim: int, ids: list[int], vectors: np.ndarray, ann_min: int = ANN_MIN
    ) -> VectorIndex:
        index = cls(dim, ann_min)
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
            if self._ann is not None:  # HNSW takes additions in place
                self._ann.add_with_ids(vecs, np.asarray(ids, dtype=np.int64))

    def remove(self, ids: list[int]) -> None:
        if ids:
            self._index.remove_ids(np.asarray(ids, dtype=np.int64))
            self._ann = None  # HNSW cannot remove: rebuilt on the next search

    def search(
        self, query: np.ndarray, k: int, allowed: set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Up to k (chunk id, score) pairs, best first; only ids in `allowed` when given."""
        n = len(self)
        if n == 0 or k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        index, params = self._approximate() or self._index, None
        if allowed is not None:
            if not allowed:
                return []
            index = self._index  # a filter can leave HNSW's graph walk with too few results
            selector = faiss.IDSelectorBatch(np.asarray(sorted(allowed), dtype=np.int64))
            params = faiss.SearchParameters(sel=selector)
        scores, ids = index.search(q, min(k, n), params=params)
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
    def load(
        cls,
        path: Path,
        dim: int | None = None,
        expected_ids: set[int] | None = None,
        ann_min: int = ANN_MIN,
    ) -> VectorIndex | None:
        """The saved index, or None if it is missing, damaged, not of `dim` dimensions or (with
        `expected_ids`) not of exactly these ids."""
        try:
            raw = faiss.read_index(str(path))
        except (RuntimeError, OSError):
            return None
        if (dim is not None and raw.d != dim) or not isinstance(raw, faiss.IndexIDMap2):
            return None
        index = cls(raw.d, ann_min)
        index._index = raw
        if expected_ids is not None and (
            len(index) != len(expected_ids) or index.ids() != expected_ids
        ):
            return None
        return index
