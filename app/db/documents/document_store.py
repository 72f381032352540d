"""`DocumentStore`: collections and their documents, as the API sees them.

Every call takes the caller's `tenant_id`: another tenant's collection or document does not
exist for it. The ingestion worker's and retrieval's calls (by document or chunk id) are internal
and live in `ChunkStore` (app/db/documents/chunk_store.py). Each method is one short transaction,
like `Store`'s; it shares the Store's engine.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from app.db.documents.collection_version import bump_version
from app.db.documents.document_models import ChunkTokens, Collection, DocChunk, Document
from app.db.documents.document_records import (
    ChunkRecord,
    CollectionRecord,
    DocumentRecord,
    OcrState,
    chunk_record,
    collection_record,
    document_record,
)
from app.db.models import utcnow
from app.db.replicas.deletion_log import lock_log, log_deletions
from app.db.store import Store

# A collection's fields a client may change after making it. The chunking and the model are
# not among them: its stored chunks were made with those.
UPDATABLE = frozenset({"name", "mode", "kv_reuse"})


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


class DocumentStore:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    # --- collections ----------------------------------------------------------------------

    def create_collection(
        self,
        tenant_id: str,
        name: str,
        chunk_tokens: int,
        overlap_tokens: int,
        system_prompt: str | None,
        kv_reuse: str | None = None,
        model: str | None = None,
        mode: str = "retrieval",
    ) -> CollectionRecord:
        """`model`: the name of the model whose server makes it (its documents are chunked in
        that model's tokens); `mode`: retrieval | full, what its questions put first."""
        c = Collection(
            id=new_id("col-"),
            tenant_id=tenant_id,
            name=name,
            chunk_tokens=chunk_tokens,
            overlap_tokens=overlap_tokens,
            system_prompt=system_prompt,
            kv_reuse=kv_reuse,
            model=model,
            mode=mode,
            version=0,
            created_at=utcnow(),
        )
        with self._tx(write=True) as s:
            s.add(c)
        return collection_record(c)

    def list_collections(self, tenant_id: str) -> list[CollectionRecord]:
        n_docs = (
            select(func.count(Document.id))
            .where(Document.collection_id == Collection.id)
            .correlate(Collection)
            .scalar_subquery()
        )
        query = (
            select(Collection, n_docs)
            .where(Collection.tenant_id == tenant_id)
            .order_by(Collection.created_at, Collection.id)
        )
        with self._tx() as s:
            return [collection_record(c, n) for c, n in s.execute(query).all()]

    def get_collection(self, tenant_id: str, collection_id: str) -> CollectionRecord | None:
        with self._tx() as s:
            c = s.get(Collection, collection_id)
            if c is None or c.tenant_id != tenant_id:
                return None
            n = s.scalar(select(func.count(Document.id)).where(Document.collection_id == c.id))
            return collection_record(c, n or 0)

    def update_collection(
        self, tenant_id: str, collection_id: str, fields: dict[str, Any]
    ) -> CollectionRecord | None:
        """The collection with these of its mutable fields changed (UPDATABLE); None if there
        is no such collection for this tenant."""
        unknown = set(fields) - UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        with self._tx(write=True) as s:
            c = s.get(Collection, collection_id)
            if c is None or c.tenant_id != tenant_id:
                return None
            for name, value in fields.items():
                setattr(c, name, value)
            s.flush()
            n = s.scalar(select(func.count(Document.id)).where(Document.collection_id == c.id))
            return collection_record(c, n or 0)

    def delete_collection(self, tenant_id: str, collection_id: str) -> list[str] | None:
        """The ids of the documents deleted with it; None if there was no such collection.
        They are logged as deleted, for every replica's caches (app/db/replicas/deletion_log.py)."""
        with self._tx(write=True) as s:
            lock_log(s)
            c = s.get(Collection, collection_id)
            if c is None or c.tenant_id != tenant_id:
                return None
            docs = list(s.scalars(select(Document.id).where(Document.collection_id == c.id)))
            s.delete(c)  # documents, chunks and token ids go with it (ON DELETE CASCADE)
            log_deletions(s, docs)
            return docs

    # --- documents ------------------------------------------------------------------------

    def add_document(
        self,
        tenant_id: str,
        collection_id: str,
        *,
        filename: str,
        kind: str,
        sha256: str,
        text: str,
        page_starts: list[int],
        metadata: dict[str, Any],
        adopt_model: str | None = None,
        ocr_pages: list[int] | None = None,
        source: bytes | None = None,
    ) -> tuple[DocumentRecord, bool] | None:
        """(the document, duplicate?): the same sha256 in the collection returns the stored
        one. None if the collection does not exist for this tenant. `adopt_model`: a collection
        that has no model yet (made before collections had one) becomes this model's, in the
        same transaction, so that a server of that model ingests the document. `ocr_pages`:
        pages the worker is to read by OCR from `source`, the uploaded bytes (kept until then).
        """
        for _ in range(2):  # PostgreSQL: a concurrent insert of the same content wins; retry
            try:
                with self._tx(write=True) as s:
                    c = s.get(Collection, collection_id)
                    if c is None or c.tenant_id != tenant_id:
                        return None
                    if c.model is None and adopt_model is not None:
                        # Only while it has none: another server's adoption meanwhile stands.
                        s.execute(
                            update(Collection)
                            .where(Collection.id == c.id, Collection.model.is_(None))
                            .values(model=adopt_model)
                        )
                    found = s.scalar(
                        select(Document).where(
                            Document.collection_id == collection_id, Document.sha256 == sha256
                        )
                    )
                    if found is not None:
                        return document_record(found), True
                    d = Document(
                        id=new_id("doc-"),
                        collection_id=collection_id,
                        filename=filename,
                        kind=kind,
                        sha256=sha256,
                        text=text,
                        page_starts=page_starts,
                        doc_metadata=metadata,
                        status="queued",
                        chunks_done=0,
                        chunks_total=0,
                        n_tokens=0,
                        error=None,
                        created_at=utcnow(),
                        source=source if ocr_pages else None,
                        ocr=OcrState(ocr_pages, [], []).to_json() if ocr_pages else None,
                        ocr_done=0,
                    )
                    s.add(d)
                    s.flush()
                    return document_record(d), False
            except IntegrityError:
                continue
        raise RuntimeError("could not store the document")

    def _owned(self, s: Any, tenant_id: str, document_id: str) -> Document | None:
        d = s.get(Document, document_id)
        if d is None:
            return None
        c = s.get(Collection, d.collection_id)
        return d if c is not None and c.tenant_id == tenant_id else None

    def get_document(self, tenant_id: str, document_id: str) -> DocumentRecord | None:
        with self._tx() as s:
            d = self._owned(s, tenant_id, document_id)
            return None if d is None else document_record(d)

    def list_documents(self, tenant_id: str, collection_id: str) -> list[DocumentRecord] | None:
        with self._tx() as s:
            c = s.get(Collection, collection_id)
            if c is None or c.tenant_id != tenant_id:
                return None
            query = (
                select(Document)
                .where(Document.collection_id == collection_id)
                .order_by(Document.created_at, Document.id)
            )
            return [document_record(d) for d in s.scalars(query)]

    def delete_document(self, tenant_id: str, document_id: str) -> DocumentRecord | None:
        """The deleted document, logged as deleted and its collection's version bumped (every
        replica's index and caches drop it); None if there was no such document."""
        with self._tx(write=True) as s:
            lock_log(s)
            d = self._owned(s, tenant_id, document_id)
            if d is None:
                return None
            record = document_record(d)
            bump_version(s, d.collection_id)  # the collection's row before the document's
            s.delete(d)  # chunks and token ids cascade
            log_deletions(s, [document_id])
            return record

    def chunks(self, tenant_id: str, document_id: str, model: str = "") -> list[ChunkRecord] | None:
        """A document's chunks in order, with their token ids for `model` where stored."""
        with self._tx() as s:
            d = self._owned(s, tenant_id, document_id)
            if d is None:
                return None
            query = (
                select(DocChunk, ChunkTokens.token_ids)
                .outerjoin(
                    ChunkTokens,
                    (ChunkTokens.chunk_id == DocChunk.id) & (ChunkTokens.model == model),
                )
                .where(DocChunk.document_id == d.id)
                .order_by(DocChunk.ordinal)
            )
            return [chunk_record(c, d.filename, t) for c, t in s.execute(query).all()]
