"""Re-embedding a collection with this server's embedding backend (`python -m app docs reembed`).

A collection keeps the vectors of the backend that made them, and a server with another
`--embedding-backend` refuses it (409) rather than mix two backends' vectors in one index. After
an upgrade that changed the default backend, this is how such a collection moves over: every
ready chunk's text is embedded again, then all its vectors and its backend are replaced in one
transaction, so a search sees the old vectors or the new ones, never a mix. A document finished
or deleted meanwhile makes the write refuse; the pass is then repeated. A running server notices
the new backend at its next use of the collection and rebuilds its index from the database; an
index file is named after the backend that made it, so no server (another replica's data
directory, one stopped meanwhile) reads an older file as the new vectors.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.docs.library import DocLibrary

BATCH = 32  # chunks embedded between two progress reports
ATTEMPTS = 3


class ReembedConflict(RuntimeError):
    """Documents kept coming or going while the collection was re-embedded."""


def reembed_collection(
    store: ChunkStore,
    library: DocLibrary,
    collection_id: str,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> int:
    """Embed every ready chunk of the collection again with the library's backend and store
    the vectors; returns how many chunks. Raises ReembedConflict after ATTEMPTS passes that
    each saw the collection change under them."""
    embedder = library.embedder()
    for _ in range(ATTEMPTS):
        ids, _, texts = store.vectors(collection_id, library.dim)
        vectors = np.zeros((len(ids), embedder.dim), dtype=np.float32)
        for start in range(0, len(texts), BATCH):
            vectors[start : start + BATCH] = embedder.embed(texts[start : start + BATCH])
            progress(min(start + BATCH, len(texts)), len(texts))
        if store.replace_vectors(collection_id, ids, vectors, library.backend):
            return len(ids)
    raise ReembedConflict(f"collection {collection_id} kept changing while it was re-embedded")
