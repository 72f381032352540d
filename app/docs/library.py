"""`DocLibrary`: the embedder and each collection's search indexes, for one server process.

The embedding model is loaded on first use (never for servers that hold no documents), in
whichever worker thread needs it first, never on the event loop or the engine thread. FAISS
indexes are built lazily per collection: loaded from their file when it matches the database,
else rebuilt from the vectors stored there (the truth) and saved again.

An index is a cache of the database, which other replicas (and `python -m app docs ingest`)
change too: each is synced at its collection's version (app/db/documents/collection_version.py),
checked before every use. A newer version brings the index up to date (chunks added, chunks of
deleted documents removed), so a document made ready anywhere is found here and a deleted one never
is. A file that lags the database (saved before the last changes, which are written at most every
SAVE_EVERY_S and at shutdown) is brought up to date the same way at start-up: a restart
neither re-embeds nor rebuilds.

Each collection keeps the embedding backend that made its vectors (`--embedding-backend`); a
server of another backend refuses to add to it or search it (409), since its query vectors would
be compared with vectors of another model's making.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.chunk_writes import BackendMismatch
from app.engine.request import RequestError
from rag.bm25 import Bm25Index
from rag.embedder import DEFAULT_BACKEND, load_embedder
from rag.index import ANN_MIN, VectorIndex
from rag.retriever import Hit, retrieve

log = logging.getLogger(__name__)

DIM = 384  # all-MiniLM-L6-v2; another model's size is read once it is loaded
SAVE_EVERY_S = 10.0  # an index file is rewritten at most this often while documents come in


class DocLibrary:
    def __init__(
        self,
        store: ChunkStore,
        index_dir: Path,
        model_path: str | None,
        threads: int,
        backend: str = DEFAULT_BACKEND,
        ann_min: int = ANN_MIN,
    ) -> None:
        """`threads`: the embedder's most threads (the ingestion worker lowers them while the
        engine computes)."""
        self.store = store
        self.index_dir = index_dir
        self.backend = backend
        self.ann_min = ann_min  # vectors from which a collection is searched by HNSW
        self._model_path = model_path
        self.threads = threads
        self._embedder = None  # rag.embedder's Embedder or OnnxEmbedder, once loaded
        self._load_lock = threading.Lock()
        self._lock = threading.Lock()  # guards the two dicts below and index changes
        self._indexes: dict[str, VectorIndex] = {}
        self._versions: dict[str, int] = {}  # the version each index was synced at
        self._bm25: dict[str, Bm25Index] = {}
        self._dirty: set[str] = set()  # collections whose file lags their index
        self._written: dict[str, float] = {}  # collection -> when its file was last written
        # The backend that made each indexed collection's vectors, as of its indexed version
        # (None: no vectors yet); a re-embedding (`app docs reembed`) changes it.
        self._made_by: dict[str, str | None] = {}

    @property
    def loaded(self) -> bool:
        return self._embedder is not None

    def embedder(self):  # noqa: ANN201 (Embedder or OnnxEmbedder: the same methods)
        with self._load_lock:
            if self._embedder is None:
                log.info("loading the embedding model")
                self._embedder = load_embedder(self.backend, self._model_path, self.threads)
            return self._embedder

    @property
    def dim(self) -> int:
        return self._embedder.dim if self._embedder is not None else DIM

    def check_backend(self, collection_id: str) -> VectorIndex:
        """The collection's index; raise (409) if its vectors were made by another embedding
        backend."""
        index = self.index(collection_id)  # the backend known for it, as of its version
        with self._lock:
            have = self._made_by.get(collection_id)
        if have is not None and have != self.backend:
            mismatch = BackendMismatch(collection_id, have, self.backend)
            raise RequestError(str(mismatch), code="embedding_backend_mismatch", status=409)
        return index

    def index_path(self, collection_id: str) -> Path:
        """The index file, named after the backend that made its vectors (as of the last
        index()): a file another backend made is never read as this one's."""
        backend = self._made_by.get(collection_id) or "empty"
        return self.index_dir / f"{collection_id}.{backend}.faiss"

    def _unlink_files(self, collection_id: str) -> None:
        """Every index file of the collection (older names and other backends' too)."""
        for path in self.index_dir.glob(f"{collection_id}.*faiss"):
            path.unlink(missing_ok=True)

    def index(self, collection_id: str) -> VectorIndex:
        """The collection's index, in step with the database: first its file if it holds
        exactly the database's chunks, else rebuilt from the stored vectors (and saved); then
        synced whenever the collection's version has moved on."""
        # Read before the chunks: a change committed after this read moves the version past
        # the one recorded, so the next use syncs again.
        version = self.store.version(collection_id)
        with self._lock:
            found = self._indexes.get(collection_id)
            current = version is None or self._versions.get(collection_id) == version
            if found is not None and current:
                return found
            backend = self.store.backend_of(collection_id)
            if found is not None and self._made_by.get(collection_id) != backend:
                # Re-embedded by another backend: every vector changed under the same ids.
                self._bm25.pop(collection_id, None)
                found = None
            self._made_by[collection_id] = backend
            index = self._load(collection_id) if found is None else self._sync(collection_id, found)
            if version is not None:
                self._versions[collection_id] = version
            return index

    def _sync(self, collection_id: str, index: VectorIndex) -> VectorIndex:
        """Add the ready chunks the index lacks, remove those no longer in the database."""
        want, have = self.store.ready_chunk_ids(collection_id), index.ids()
        gone = sorted(have - want)
        ids, vectors = self.store.vectors_of(sorted(want - have))
        if not gone and not ids:
            return index  # the change was this process's own, already applied
        index.remove(gone)
        if ids:
            if len(index) == 0 and index.dim != len(vectors[0]):  # empty, sized by default
                index = self._indexes[collection_id] = VectorIndex(len(vectors[0]), self.ann_min)
            index.add(ids, np.stack(vectors))
        log.info("index of %s synced: %d chunks added, %d gone", collection_id, len(ids), len(gone))
        self._changed(collection_id, index)
        return index

    def _changed(self, collection_id: str, index: VectorIndex) -> None:
        """Under _lock: the index changed; its file is rewritten unless it was lately (the
        database is the truth: a file that lags it is synced at the next start)."""
        self._bm25.pop(collection_id, None)
        self._dirty.add(collection_id)
        now = time.monotonic()
        if now - self._written.get(collection_id, float("-inf")) >= SAVE_EVERY_S:
            index.save(self.index_path(collection_id))
            self._dirty.discard(collection_id)
            self._written[collection_id] = now

    def flush(self) -> None:
        """Write every index changed since its file last was (at shutdown)."""
        with self._lock:
            for collection_id in sorted(self._dirty):
                if collection_id in self._indexes:
                    self._indexes[collection_id].save(self.index_path(collection_id))
            self._dirty.clear()

    def _load(self, collection_id: str) -> VectorIndex:
        """The saved file brought up to date (only the chunks it lacks are read), or, when it
        is missing or damaged, rebuilt from every stored vector."""
        path = self.index_path(collection_id)
        if not path.exists():  # another backend's file, or one of an older name, is never read
            self._unlink_files(collection_id)
        index = VectorIndex.load(path, ann_min=self.ann_min)
        if index is not None:
            self._indexes[collection_id] = index
            return self._sync(collection_id, index)
        log.info("rebuilding the index of %s from the database", collection_id)
        ids, vectors, _ = self.store.vectors(collection_id, self.dim)
        index = VectorIndex.build(vectors.shape[1], ids, vectors, self.ann_min)
        index.save(self.index_path(collection_id))
        self._indexes[collection_id] = index
        return index

    def load_all(self) -> None:
        """At start-up: check (or rebuild) every collection's index file."""
        for collection_id in self.store.collection_ids():
            self.index(collection_id)

    def _bm25_of(self, collection_id: str) -> Bm25Index:
        with self._lock:
            found = self._bm25.get(collection_id)
        if found is None:
            ids, _, texts = self.store.vectors(collection_id, self.dim)
            found = Bm25Index(ids, texts)
            with self._lock:
                self._bm25[collection_id] = found
        return found

    def added(self, collection_id: str, ids: list[int], vectors: np.ndarray) -> None:
        index = self.index(collection_id)
        with self._lock:
            if len(index) == 0 and index.dim != vectors.shape[1]:  # empty, sized by default
                index = self._indexes[collection_id] = VectorIndex(vectors.shape[1], self.ann_min)
            if not set(ids) & index.ids():
                index.add(ids, vectors)
            self._changed(collection_id, index)

    def removed(self, collection_id: str, ids: list[int]) -> None:
        index = self.index(collection_id)
        with self._lock:
            index.remove(ids)
            self._changed(collection_id, index)

    def dropped(self, collection_id: str) -> None:
        with self._lock:
            self._indexes.pop(collection_id, None)
            self._versions.pop(collection_id, None)
            self._bm25.pop(collection_id, None)
            self._dirty.discard(collection_id)
            self._made_by.pop(collection_id, None)
        self._unlink_files(collection_id)

    def search(
        self,
        collection_id: str,
        query: str,
        top_k: int,
        score_threshold: float | None,
        allowed: set[int] | None,
        hybrid: bool,
    ) -> list[Hit]:
        """Blocking (embeds the query): call from a worker thread."""
        index = self.check_backend(collection_id)
        vector = self.embedder().embed_query(query)
        return retrieve(
            index,
            vector,
            top_k,
            score_threshold=score_threshold,
            allowed=allowed,
            bm25=self._bm25_of(collection_id) if hybrid else None,
            query_text=query,
        )
