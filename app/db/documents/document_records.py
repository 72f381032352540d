"""Plain results of `DocumentStore` and `ChunkStore` (no ORM objects leave app/db)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from app.db.documents.document_models import Collection, DocChunk, Document
from rag.ocr.ocr_reader import PageFailure


@dataclass(slots=True)
class CollectionRecord:
    id: str
    tenant_id: str
    name: str
    chunk_tokens: int
    overlap_tokens: int
    system_prompt: str | None
    created_at: datetime
    n_documents: int = 0
    embedding_backend: str | None = None  # what made its vectors; None while it has none
    kv_reuse: str | None = None  # prefix | blend for requests that do not say; None: --kv-reuse
    model: str | None = None  # the name of the model whose server made it; None: not known
    mode: str = "retrieval"  # retrieval | full: what a question that does not say puts first
    version: int = 0  # moves on whenever its ready chunks change (collection_version.py)


@dataclass(slots=True)
class OcrState:
    """A document's pages read by OCR: `pending` until the worker has read them (`done` of them
    so far), then each in `pages` or, with its reason, in `failed`."""

    pending: list[int]
    pages: list[int]
    failed: list[PageFailure]
    done: int = 0

    @property
    def total(self) -> int:
        """Pages OCR has to read or has read."""
        return len(self.pending) or len(self.pages) + len(self.failed)

    def to_json(self) -> dict[str, Any]:
        failed = [{"page": f.page, "reason": f.reason} for f in self.failed]
        return {"pending": self.pending, "pages": self.pages, "failed": failed}


def ocr_state(stored: dict[str, Any] | None, done: int = 0) -> OcrState | None:
    if stored is None:
        return None
    failed = [PageFailure(int(f["page"]), str(f["reason"])) for f in stored.get("failed", [])]
    return OcrState(list(stored.get("pending", [])), list(stored.get("pages", [])), failed, done)


@dataclass(slots=True)
class DocumentRecord:
    id: str
    collection_id: str
    filename: str
    kind: str
    sha256: str
    metadata: dict[str, Any]
    status: str  # queued | processing | ready | error
    chunks_done: int
    chunks_total: int
    n_tokens: int
    error: str | None
    created_at: datetime
    ocr: OcrState | None = None  # None: no page of it needed OCR


@dataclass(slots=True)
class ChunkRecord:
    id: int
    document_id: str
    ordinal: int
    number: int
    text: str
    char_start: int
    char_end: int
    page: int | None
    filename: str = ""
    token_ids: list[int] | None = None  # for the model asked for, if stored


@dataclass(slots=True)
class NewChunk:
    """A chunk ready to store: ingestion's output."""

    ordinal: int
    text: str
    char_start: int
    char_end: int
    page: int | None
    embedding: np.ndarray


def collection_record(c: Collection, n_documents: int = 0) -> CollectionRecord:
    return CollectionRecord(
        c.id,
        c.tenant_id,
        c.name,
        c.chunk_tokens,
        c.overlap_tokens,
        c.system_prompt,
        c.created_at,
        n_documents,
        c.embedding_backend,
        c.kv_reuse,
        c.model,
        c.mode or "retrieval",
        c.version or 0,
    )


def document_record(d: Document) -> DocumentRecord:
    return DocumentRecord(
        d.id,
        d.collection_id,
        d.filename,
        d.kind,
        d.sha256,
        d.doc_metadata,
        d.status,
        d.chunks_done,
        d.chunks_total,
        d.n_tokens,
        d.error,
        d.created_at,
        ocr_state(d.ocr, d.ocr_done),
    )


def chunk_record(
    c: DocChunk, filename: str = "", token_ids: list[int] | None = None
) -> ChunkRecord:
    return ChunkRecord(
        c.id,
        c.document_id,
        c.ordinal,
        c.number,
        c.text,
        c.char_start,
        c.char_end,
        c.page,
        filename,
        token_ids,
    )
