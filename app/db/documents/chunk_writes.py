"""Writing a finished document's chunks (`ChunkStore.finish_document`,
app/db/documents/chunk_store.py).

A document's chunks, their vectors and token ids are stored, and the document marked ready, in
one transaction, so a document is searchable whole or not at all. Chunks are numbered (their [n]
in prompts) from one past the collection's largest number; two workers finishing documents of
one collection may both have been given the same first number, and the later one is told to
renumber (`NumbersTaken`). A collection holds the vectors of one embedding backend only: the
first document's backend becomes the collection's, and another is refused (`BackendMismatch`).
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.db.documents.collection_version import bump_version
from app.db.documents.document_models import ChunkTokens, Collection, DocChunk, Document
from app.db.documents.document_records import NewChunk


class NumbersTaken(Exception):
    """Another worker stored chunks of the collection under the numbers this document was
    given meanwhile; its chunks must be numbered (their headers tokenized) from `next` on."""

    def __init__(self, next_number: int) -> None:
        super().__init__(f"chunk numbers taken; the next free one is {next_number}")
        self.next = next_number


class BackendMismatch(Exception):
    """The collection's vectors were made by another embedding backend than this one."""

    def __init__(self, collection_id: str, have: str, want: str) -> None:
        super().__init__(
            f"collection {collection_id} holds vectors made by the embedding backend {have!r}; "
            f"this server embeds with {want!r} (--embedding-backend): vectors of two backends "
            f"are not mixed in one collection. Start the server with --embedding-backend "
            f"{have}, use another collection, or embed this one again: python -m app docs "
            f"reembed --collection {collection_id}"
        )
        self.collection_id, self.have, self.want = collection_id, have, want


def max_number(collection_id: str) -> Select:
    """The largest chunk number in the collection (NULL while it has no chunks)."""
    return (
        select(func.max(DocChunk.number))
        .join(Document, Document.id == DocChunk.document_id)
        .where(Document.collection_id == collection_id)
    )


def write_chunks(
    s: Session,
    document_id: str,
    chunks: list[NewChunk],
    model: str,
    token_ids: list[list[int]],
    first_number: int,
    worker: str | None,
    backend: str | None,
) -> bool:
    """`finish_document`'s transaction, in `s`: False if the document is gone or (with
    `worker`) that worker no longer holds its claim."""
    found = s.scalar(select(Document.collection_id).where(Document.id == document_id))
    if found is None:
        return False
    # The collection's row first (the order deletes lock in): this also serialises the
    # workers finishing documents of one collection, so the numbers checked stay free.
    bump_version(s, found)
    if backend is not None:
        _claim_backend(s, found, backend)
    d = s.scalar(select(Document).where(Document.id == document_id).with_for_update())
    if d is None or (worker is not None and d.claimed_by != worker):
        return False
    taken = s.scalar(max_number(found)) or 0
    if first_number <= taken:
        raise NumbersTaken(taken + 1)
    rows = _chunk_rows(document_id, chunks, first_number)
    s.add_all(rows)
    s.flush()  # the rows' ids, which their token ids need
    for row, ids in zip(rows, token_ids, strict=True):
        s.add(ChunkTokens(chunk_id=row.id, model=model, token_ids=ids))
    d.status, d.chunks_done, d.chunks_total, d.error = "ready", len(chunks), len(chunks), None
    d.n_tokens = sum(len(t) for t in token_ids)
    d.claimed_by, d.lease_until = None, None
    return True


def _claim_backend(s: Session, collection_id: str, backend: str) -> None:
    """The collection's backend becomes `backend` if it has none; BackendMismatch if it has
    another."""
    collection = s.get(Collection, collection_id)
    if collection.embedding_backend is None:
        collection.embedding_backend = backend
    elif collection.embedding_backend != backend:
        raise BackendMismatch(collection_id, collection.embedding_backend, backend)


def _chunk_rows(document_id: str, chunks: list[NewChunk], first_number: int) -> list[DocChunk]:
    """The chunks' rows, chunk i numbered first_number + its ordinal."""
    return [
        DocChunk(
            document_id=document_id,
            ordinal=c.ordinal,
            number=first_number + c.ordinal,
            text=c.text,
            char_start=c.char_start,
            char_end=c.char_end,
            page=c.page,
            embedding=np.asarray(c.embedding, dtype=np.float32).tobytes(),
        )
        for c in chunks
    ]
