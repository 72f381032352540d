"""SQLAlchemy 2.0 ORM models of documents: collections, their documents, the
documents' chunks with their vectors and token ids, and the log of deleted documents.

They are declared on app/db/models.py's `Base`, so its metadata holds these tables as well once
this module is imported; migrations/env.py imports it for Alembic, and
tests/app/db/test_migrations.py checks these classes against the migrations like the others.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models import Base, Json, UTCDateTime, utcnow

DOC_STATUSES = ("queued", "processing", "ready", "error")


class Collection(Base):
    """A set of documents searched together. tenant_id: "" for the default tenant."""

    __tablename__ = "collections"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # "col-" + 24 hex
    tenant_id: Mapped[str] = mapped_column(String(128), default="", server_default="", index=True)
    name: Mapped[str] = mapped_column(Text)
    chunk_tokens: Mapped[int] = mapped_column(Integer)
    overlap_tokens: Mapped[int] = mapped_column(Integer)
    system_prompt: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Bumped in the transaction that makes a document ready or deletes one: a replica's search
    # index that was synced at another version is stale (app/docs/library.py).
    version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The embedding backend that made the collection's vectors (rag/embedder.py BACKENDS), set
    # by its first ingested document; vectors of another backend are never added (they
    # would not be comparable).
    embedding_backend: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # prefix | blend: how requests that do not say reuse chunk KV (docs/blend.md); None:
    # --kv-reuse.
    kv_reuse: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # The name of the model whose server made it: its documents are ingested (chunked in that
    # model's tokens) by that model's servers only where servers of several models share the
    # database (--docs-own-model), and router mode sends its requests there. None: made before
    # collections had one.
    model: Mapped[str | None] = mapped_column(Text, nullable=True)
    # retrieval | full: what a question that does not say puts before it, the best chunks or
    # every ready document (docs/documents.md, Full-document mode).
    mode: Mapped[str] = mapped_column(String(16), default="retrieval", server_default="retrieval")


class Document(Base):
    """An uploaded document: its extracted text waits here until ingestion has chunked it."""

    __tablename__ = "documents"
    __table_args__ = (
        # The same content twice in one collection is one document ("duplicate": true).
        UniqueConstraint("collection_id", "sha256"),
        CheckConstraint(f"status IN {DOC_STATUSES!r}", name="status"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # "doc-" + 24 hex
    collection_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("collections.id", ondelete="CASCADE")
    )
    filename: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))  # text | markdown | html | pdf | docx | image
    sha256: Mapped[str] = mapped_column(String(64))  # of the uploaded bytes
    text: Mapped[str] = mapped_column(Text)  # extracted text: what ingestion (re)starts from
    page_starts: Mapped[list[int]] = mapped_column(Json)
    doc_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", Json)
    status: Mapped[str] = mapped_column(String(16))
    chunks_done: Mapped[int] = mapped_column(Integer, default=0)
    chunks_total: Mapped[int] = mapped_column(Integer, default=0)
    n_tokens: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The ingestion claim (app/db/replicas/ingest_claims.py): which worker holds the document, and
    # until when unless it renews; another worker may take it over after that.
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # OCR (rag/ocr/): the uploaded bytes while pages of them wait to be read (the worker that
    # claims the document reads them from here), NULL once they are read and for documents that
    # needed none. Deferred: listing or reading documents never loads it.
    source: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, deferred=True)
    # {"pending": [pages], "pages": [pages read], "failed": [{"page", "reason"}]}; NULL: no page
    # needed OCR. `text` holds the read pages' text once `pending` is empty.
    ocr: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
    ocr_done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # of pending


class DocumentDeletion(Base):
    """A deleted document, logged in the deleting transaction: every replica reads the log to
    drop the document's KV from its own cache tiers (app/docs/background/deletion_watch.py)."""

    __tablename__ = "document_deletions"
    # Ids only grow (SQLite AUTOINCREMENT; PostgreSQL's sequence, with writers serialised by a
    # table lock): a reader that has seen id n has seen every deletion before it.
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    document_id: Mapped[str] = mapped_column(String(64))
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DocChunk(Base):
    __tablename__ = "chunks"
    __table_args__ = (UniqueConstraint("document_id", "ordinal"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    document_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("documents.id", ondelete="CASCADE")
    )
    ordinal: Mapped[int] = mapped_column(Integer)  # 0-based position in the document
    number: Mapped[int] = mapped_column(Integer)  # its [n] in prompts, unique in the collection
    text: Mapped[str] = mapped_column(Text)
    char_start: Mapped[int] = mapped_column(Integer)
    char_end: Mapped[int] = mapped_column(Integer)
    page: Mapped[int | None] = mapped_column(Integer)
    embedding: Mapped[bytes] = mapped_column(LargeBinary)  # float32, L2-normalised


class ChunkTokens(Base):
    """A chunk's prompt token ids (header + text) for one chat model (by file fingerprint)."""

    __tablename__ = "chunk_tokens"
    __table_args__ = (PrimaryKeyConstraint("chunk_id", "model"),)

    chunk_id: Mapped[int] = mapped_column(Integer, ForeignKey("chunks.id", ondelete="CASCADE"))
    model: Mapped[str] = mapped_column(String(64))
    token_ids: Mapped[list[int]] = mapped_column(Json)
