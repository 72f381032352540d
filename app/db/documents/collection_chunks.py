"""`CollectionChunks`: a whole collection read at once, for its full-document mode.

A collection in full mode puts every ready document before a question, in its stable order:
its chunks by number. A chunk's number is handed out when its document is made ready (one past
the collection's largest, app/db/documents/chunk_writes.py), so a document made ready later
always comes after every chunk there is, and the order of what was there never changes: the
prefix of the collection grows at its end. Deleting a document removes its chunks from where
they were. Internal calls by collection id, made after the API checked the tenant (like
`ChunkStore`'s).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from app.db.documents.document_models import ChunkTokens, Collection, DocChunk, Document
from app.db.documents.document_records import (
    ChunkRecord,
    CollectionRecord,
    chunk_record,
    collection_record,
)
from app.db.store import Store


@dataclass(slots=True, frozen=True)
class ReadySize:
    """What a collection's ready documents hold, from their rows alone."""

    documents: int
    tokens: int  # their chunks' tokens (numbered headers included) in the ingesting model's
    version: int  # the collection's version (app/db/documents/collection_version.py)


class CollectionChunks:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    def size(self, collection_id: str) -> ReadySize | None:
        """Its ready documents' count and tokens; None if the collection is gone."""
        query = select(func.count(Document.id), func.coalesce(func.sum(Document.n_tokens), 0))
        query = query.where(Document.collection_id == collection_id, Document.status == "ready")
        with self._tx() as s:
            version = s.scalar(select(Collection.version).where(Collection.id == collection_id))
            if version is None:
                return None
            n, tokens = s.execute(query).one()
            return ReadySize(int(n), int(tokens), int(version))

    def chunks(self, collection_id: str, model: str) -> tuple[int, list[ChunkRecord]]:
        """(the collection's version, every ready chunk in the stable order: by number), with
        their token ids for `model` where stored, read in one transaction."""
        query = (
            select(DocChunk, Document.filename, ChunkTokens.token_ids)
            .join(Document, Document.id == DocChunk.document_id)
            .outerjoin(
                ChunkTokens, (ChunkTokens.chunk_id == DocChunk.id) & (ChunkTokens.model == model)
            )
            .where(Document.collection_id == collection_id, Document.status == "ready")
            .order_by(DocChunk.number, DocChunk.id)
        )
        with self._tx() as s:
            version = s.scalar(select(Collection.version).where(Collection.id == collection_id))
            rows = s.execute(query).all()
        return int(version or 0), [chunk_record(c, f, t) for c, f, t in rows]

    def full_collections(self, model: str | None = None) -> list[CollectionRecord]:
        """Every collection in full mode that has a ready document, oldest first; `model`: only
        those of that model (a restart prefills their prefixes)."""
        ready = select(Document.id).where(
            Document.collection_id == Collection.id, Document.status == "ready"
        )
        query = (
            select(Collection)
            .where(Collection.mode == "full", ready.exists())
            .order_by(Collection.created_at, Collection.id)
        )
        if model is not None:
            query = query.where(Collection.model == model)
        with self._tx() as s:
            return [collection_record(c) for c in s.scalars(query)]

    def collection(self, collection_id: str) -> CollectionRecord | None:
        """The collection by id alone (the background work's: every tenant's)."""
        with self._tx() as s:
            c = s.get(Collection, collection_id)
            return None if c is None else collection_record(c)
