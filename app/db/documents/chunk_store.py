"""`ChunkStore`: the internal side of documents, by document or chunk id.

The ingestion worker reads a queued document, reports its progress and stores its chunks,
vectors and token ids (and, before that, the pages it read by OCR: `ocr`,
app/db/documents/ocr_store.py); the search indexes and retrieval read the chunks back. None of these
calls takes a tenant: they run after the API (`DocumentStore`, app/db/documents/document_store.py)
has checked ownership, or for every tenant at once. Each method is one short transaction, like
`Store`'s; it shares the Store's engine. Which worker ingests a document is `claims`' business
(app/db/replicas/ingest_claims.py); how a finished document's chunks are numbered and written is
app/db/documents/chunk_writes.py's.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import select, update

from app.db.documents.chunk_writes import max_number, write_chunks
from app.db.documents.collection_version import bump_version_of, version_of
from app.db.documents.document_models import ChunkTokens, Collection, DocChunk, Document
from app.db.documents.document_records import (
    ChunkRecord,
    CollectionRecord,
    DocumentRecord,
    NewChunk,
    chunk_record,
    collection_record,
    document_record,
)
from app.db.documents.ocr_store import OcrStore
from app.db.replicas.ingest_claims import IngestClaims
from app.db.store import Store


class ChunkStore:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction
        self.claims = IngestClaims(store)
        self.ocr = OcrStore(store)

    # --- ingestion (by document id) -------------------------------------------------------

    def unfinished(self) -> list[str]:
        """Documents a restart must ingest again (queued or cut off while processing)."""
        query = (
            select(Document.id)
            .where(Document.status.in_(("queued", "processing")))
            .order_by(Document.created_at)
        )
        with self._tx() as s:
            return list(s.scalars(query))

    def ready(self, model: str | None = None) -> list[tuple[CollectionRecord, str]]:
        """Every ready document with its collection, oldest first (a restart prefills them);
        `model`: only of collections of that model."""
        query = (
            select(Collection, Document.id)
            .join(Document, Document.collection_id == Collection.id)
            .where(Document.status == "ready")
            .order_by(Document.created_at)
        )
        if model is not None:
            query = query.where(Collection.model == model)
        with self._tx() as s:
            return [(collection_record(c), d) for c, d in s.execute(query).all()]

    def ingest_input(
        self, document_id: str
    ) -> tuple[DocumentRecord, str, list[int], CollectionRecord] | None:
        with self._tx() as s:
            d = s.get(Document, document_id)
            if d is None:
                return None
            c = s.get(Collection, d.collection_id)
            return document_record(d), d.text, list(d.page_starts), collection_record(c)

    def set_progress(
        self,
        document_id: str,
        status: str,
        done: int,
        total: int,
        error: str | None = None,
        worker: str | None = None,
    ) -> bool:
        """Record progress; with `worker`, only while it holds the document's claim (an error
        ends the claim). False if nothing was recorded (deleted, or the claim was lost)."""
        values = {"status": status, "chunks_done": done, "chunks_total": total, "error": error}
        query = update(Document).where(Document.id == document_id)
        if worker is not None:
            query = query.where(Document.claimed_by == worker)
            if status == "error":
                values.update(claimed_by=None, lease_until=None)
        with self._tx(write=True) as s:
            return s.execute(query.values(**values)).rowcount == 1

    def finish_document(
        self,
        document_id: str,
        chunks: list[NewChunk],
        model: str,
        token_ids: list[list[int]],
        first_number: int,
        worker: str | None = None,
        backend: str | None = None,
    ) -> bool:
        """Store all chunks, their vectors and token ids and mark the document ready, in one
        transaction: a document is searchable whole or not at all. False if it was deleted or
        (with `worker`) that worker no longer holds its claim.

        Chunk i gets number first_number + i (from `next_number`; its header holds it);
        NumbersTaken if another worker has stored chunks under those numbers meanwhile;
        BackendMismatch if the collection's vectors were made by another `backend` (the first
        document's backend becomes the collection's)."""
        with self._tx(write=True) as s:
            return write_chunks(
                s, document_id, chunks, model, token_ids, first_number, worker, backend
            )

    def next_number(self, collection_id: str) -> int:
        """The [n] a new document's first chunk gets: one past the collection's largest. Two
        workers may both be given it; `finish_document` tells the later one (NumbersTaken)."""
        with self._tx() as s:
            return (s.scalar(max_number(collection_id)) or 0) + 1

    # --- retrieval ------------------------------------------------------------------------

    def vectors(self, collection_id: str, dim: int) -> tuple[list[int], np.ndarray, list[str]]:
        """Every ready chunk's id, vector and text in a collection: the index's truth. `dim`
        sizes an empty result; stored vectors have their own size."""
        query = (
            select(DocChunk.id, DocChunk.embedding, DocChunk.text)
            .join(Document, Document.id == DocChunk.document_id)
            .where(Document.collection_id == collection_id, Document.status == "ready")
            .order_by(DocChunk.id)
        )
        with self._tx() as s:
            rows = s.execute(query).all()
        if rows:
            dim = len(rows[0][1]) // 4  # float32
        vecs = np.zeros((len(rows), dim), dtype=np.float32)
        for i, (_, blob, _) in enumerate(rows):
            vecs[i] = np.frombuffer(blob, dtype=np.float32)
        return [r[0] for r in rows], vecs, [r[2] for r in rows]

    def version(self, collection_id: str) -> int | None:
        """The collection's version (app/db/documents/collection_version.py); None if it is gone."""
        with self._tx() as s:
            return version_of(s, collection_id)

    def ready_chunk_ids(self, collection_id: str) -> set[int]:
        """Ids of every ready chunk of the collection (what its index must hold)."""
        query = (
            select(DocChunk.id)
            .join(Document, Document.id == DocChunk.document_id)
            .where(Document.collection_id == collection_id, Document.status == "ready")
        )
        with self._tx() as s:
            return set(s.scalars(query))

    def vectors_of(self, chunk_ids: list[int]) -> tuple[list[int], list[np.ndarray]]:
        """The stored vectors of these chunks (those that still exist), by id."""
        if not chunk_ids:
            return [], []
        query = select(DocChunk.id, DocChunk.embedding).where(DocChunk.id.in_(chunk_ids))
        with self._tx() as s:
            rows = s.execute(query.order_by(DocChunk.id)).all()
        return [r[0] for r in rows], [np.frombuffer(r[1], dtype=np.float32) for r in rows]

    def replace_vectors(
        self, collection_id: str, ids: list[int], vectors: np.ndarray, backend: str
    ) -> bool:
        """Every ready chunk's vector replaced by `vectors` (by `ids`), made by `backend`, which
        becomes the collection's, in one transaction; False, changing no vector, when the ready
        chunks are not exactly `ids` any more (a document came or went meanwhile)."""
        with self._tx(write=True) as s:
            # Locks the collection's row first (no document finishes or goes meanwhile).
            if s.execute(bump_version_of(collection_id)).rowcount == 0:
                return False  # deleted
            ready = select(DocChunk.id).join(Document, Document.id == DocChunk.document_id)
            ready = ready.where(Document.collection_id == collection_id, Document.status == "ready")
            if set(s.scalars(ready)) != set(ids):
                return False  # (the version moved on: readers only sync, finding no change)
            rows = [
                {"id": i, "embedding": np.asarray(v, dtype=np.float32).tobytes()}
                for i, v in zip(ids, vectors, strict=True)
            ]
            if rows:
                s.execute(update(DocChunk), rows)  # one UPDATE by primary key, executemany
            s.execute(
                update(Collection)
                .where(Collection.id == collection_id)
                .values(embedding_backend=backend)
            )
            return True

    def backend_of(self, collection_id: str) -> str | None:
        """The embedding backend that made the collection's vectors (None: none yet)."""
        with self._tx() as s:
            query = select(Collection.embedding_backend).where(Collection.id == collection_id)
            return s.scalar(query)

    def collection_ids(self) -> list[str]:
        with self._tx() as s:
            return list(s.scalars(select(Collection.id)))

    def chunks_by_id(self, chunk_ids: list[int], model: str) -> list[ChunkRecord]:
        """The chunks (in the order asked), with their token ids for `model` where stored."""
        if not chunk_ids:
            return []
        with self._tx() as s:
            rows = s.execute(
                select(DocChunk, Document.filename)
                .join(Document, Document.id == DocChunk.document_id)
                .where(DocChunk.id.in_(chunk_ids))
            ).all()
            tokens = dict(
                s.execute(
                    select(ChunkTokens.chunk_id, ChunkTokens.token_ids).where(
                        ChunkTokens.chunk_id.in_(chunk_ids), ChunkTokens.model == model
                    )
                ).all()
            )
        found = {c.id: chunk_record(c, f, tokens.get(c.id)) for c, f in rows}
        return [found[i] for i in chunk_ids if i in found]

    def set_tokens(self, model: str, token_ids: dict[int, list[int]]) -> None:
        """Token ids for another chat model, computed on first use (existing rows stay)."""
        with self._tx(write=True) as s:
            have = set(
                s.scalars(
                    select(ChunkTokens.chunk_id).where(
                        ChunkTokens.chunk_id.in_(list(token_ids)), ChunkTokens.model == model
                    )
                )
            )
            alive = set(s.scalars(select(DocChunk.id).where(DocChunk.id.in_(list(token_ids)))))
            for chunk_id, ids in token_ids.items():
                if chunk_id not in have and chunk_id in alive:
                    s.add(ChunkTokens(chunk_id=chunk_id, model=model, token_ids=ids))

    def chunk_ids_of(self, collection_id: str, document_ids: list[str]) -> set[int]:
        """Ids of the chunks of these documents of the collection (a search filter)."""
        query = (
            select(DocChunk.id)
            .join(Document, Document.id == DocChunk.document_id)
            .where(Document.collection_id == collection_id, Document.id.in_(document_ids))
        )
        with self._tx() as s:
            return set(s.scalars(query))

    def numbered(self, document_id: str) -> list[tuple[int, int]]:
        """(chunk id, number) of a stored document's chunks, in ordinal order."""
        query = (
            select(DocChunk.id, DocChunk.number)
            .where(DocChunk.document_id == document_id)
            .order_by(DocChunk.ordinal)
        )
        with self._tx() as s:
            return [(i, n) for i, n in s.execute(query).all()]
