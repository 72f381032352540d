"""A document upload taken in: parsed (junk refused before anything is stored), stored in its
collection under its sha256 (a second upload of the same bytes is the first one again), and
queued for ingestion (chunking, embedding) in the background.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from app.db.documents.document_records import DocumentRecord
from app.docs.doc_lookup import not_found
from app.docs.document_service import Documents
from app.engine.request import RequestError
from rag.errors import DocumentError
from rag.loader import load


@dataclass(slots=True)
class Upload:
    filename: str
    data: bytes
    content_type: str | None  # as sent, if sent (a hint for the loader)
    metadata: dict[str, Any] = field(default_factory=dict)


def too_large(limit: int) -> RequestError:
    return RequestError(
        f"the document is larger than the limit of {limit} bytes (--doc-max-bytes)",
        param="file",
        code="request_too_large",
        status=413,
    )


async def take_in(
    docs: Documents, tenant: str, collection_id: str, upload: Upload
) -> tuple[DocumentRecord, bool]:
    """The stored document and whether it was there already."""
    if "\x00" in upload.filename:
        raise RequestError("the filename must not contain NUL characters", param="filename")
    with docs.uploads:  # the ingestion worker leaves a core to it meanwhile
        # Parsing (PDF) and storing are blocking work: off the event loop, in one hop, in the
        # parse pool (a PDF waits there for PDFium, never in the threads key lookups need).
        record, duplicate = await docs.parse.run(_store, docs, tenant, collection_id, upload)
    if not duplicate:
        docs.ingestor.submit(record.id)
    return record, duplicate


def _store(
    docs: Documents, tenant: str, collection_id: str, upload: Upload
) -> tuple[DocumentRecord, bool]:
    """Checked, parsed (junk refused before anything is stored) and stored. Worker thread."""
    # Vectors of another backend are not mixed in (409): refused before anything is stored.
    docs.library.check_backend(collection_id)
    try:
        limits = docs.parse_limits
        loaded = load(upload.filename, upload.data, docs.max_bytes, upload.content_type, limits)
    except DocumentError as e:
        if e.too_large:  # over one of the limits; the message says which
            raise RequestError(
                e.message, param="file", code="request_too_large", status=413
            ) from None
        raise RequestError(e.message, param="file", code="invalid_document") from None
    found = docs.store.add_document(
        tenant,
        collection_id,
        filename=upload.filename,
        kind=loaded.kind,
        sha256=hashlib.sha256(upload.data).hexdigest(),
        text=loaded.text,
        page_starts=loaded.page_starts,
        metadata=upload.metadata,
        adopt_model=docs.own_model,  # a collection from before collections had a model
        ocr_pages=loaded.ocr_pages,  # read by the worker from the upload's bytes
        source=upload.data,
    )
    if found is None:  # deleted meanwhile
        raise not_found("collection", collection_id, "collection_id")
    return found
