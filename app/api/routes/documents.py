"""Documents (issue 11): uploads to a collection, ingested (chunked, embedded) in the
background; read back with their chunks, and deleted with everything cached from them.

Tenancy: every store call takes `tenant_of(request)`; another tenant's collection or
document answers 404 as if it did not exist.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from app.api.auth import tenant_of
from app.api.doc_schemas import TextDocumentRequest, chunk_json, document_json
from app.api.media_upload import MULTIPART_OVERHEAD
from app.api.routes.collections import documents_of, forget_documents, load_collection, not_found
from app.api.services import ServicesDep
from app.engine.request import RequestError
from rag.errors import DocumentError
from rag.loader import load

router = APIRouter(prefix="/v1")


async def _upload(http: Request, limit: int) -> tuple[str, bytes, str | None, dict[str, Any]]:
    """(filename, bytes, content type, metadata) from a multipart `file` or a JSON body."""
    ctype = http.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            body = TextDocumentRequest.model_validate_json(await http.body())
        except ValueError as e:
            raise RequestError(f"invalid document: {e}", param="text") from None
        return body.filename, body.text.encode("utf-8"), None, body.metadata
    if ctype != "multipart/form-data":
        raise RequestError(
            'send multipart/form-data with a \'file\' field, or JSON {"filename", "text"}',
            code="unsupported_media_type",
            status=415,
        )
    length = http.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit + MULTIPART_OVERHEAD:
        raise _too_large(limit)
    form = await http.form(max_files=1, max_fields=8)
    file = form.get("file")
    if not isinstance(file, UploadFile):
        raise RequestError("the multipart body has no 'file' field", param="file")
    data = await file.read(limit + 1)
    metadata: dict[str, Any] = {}
    raw = form.get("metadata")
    if isinstance(raw, str) and raw.strip():
        try:
            metadata = json.loads(raw)
        except ValueError:
            raise RequestError("metadata must be a JSON object", param="metadata") from None
        if not isinstance(metadata, dict):
            raise RequestError("metadata must be a JSON object", param="metadata")
    return file.filename or "upload", data, file.content_type, metadata


def _too_large(limit: int) -> RequestError:
    return RequestError(
        f"the document is larger than the limit of {limit} bytes (--doc-max-bytes)",
        param="file",
        code="request_too_large",
        status=413,
    )


@router.post("/collections/{collection_id}/documents", status_code=202)
async def add_document(collection_id: str, http: Request, services: ServicesDep):
    docs = documents_of(services)
    await load_collection(services, http, collection_id)
    filename, data, content_type, metadata = await _upload(http, docs.max_bytes)
    if "\x00" in filename:
        raise RequestError("the filename must not contain NUL characters", param="filename")
    try:  # parsing (PDF) is CPU work: off the event loop; junk is refused before storing
        loaded = await asyncio.to_thread(load, filename, data, docs.max_bytes, content_type)
    except DocumentError as e:
        if e.too_large:
            raise _too_large(docs.max_bytes) from None
        raise RequestError(e.message, param="file", code="invalid_document") from None
    found = await asyncio.to_thread(
        docs.store.add_document,
        tenant_of(http),
        collection_id,
        filename=filename,
        kind=loaded.kind,
        sha256=hashlib.sha256(data).hexdigest(),
        text=loaded.text,
        page_starts=loaded.page_starts,
        metadata=metadata,
    )
    if found is None:
        raise not_found("collection", collection_id, "collection_id")
    record, duplicate = found
    if not duplicate:
        docs.ingestor.submit(record.id)
    return JSONResponse(document_json(record, duplicate), status_code=202)


@router.get("/collections/{collection_id}/documents")
async def list_documents(collection_id: str, http: Request, services: ServicesDep):
    docs = documents_of(services)
    found = await asyncio.to_thread(docs.store.list_documents, tenant_of(http), collection_id)
    if found is None:
        raise not_found("collection", collection_id, "collection_id")
    data = [document_json(d, prefill=docs.prefill_state(d.id)) for d in found]
    return {"object": "list", "data": data}


@router.get("/documents/{document_id}")
async def get_document(document_id: str, http: Request, services: ServicesDep):
    docs = documents_of(services)
    found = await asyncio.to_thread(docs.store.get_document, tenant_of(http), document_id)
    if found is None:
        raise not_found("document", document_id, "document_id")
    return document_json(found, prefill=docs.prefill_state(found.id))


@router.get("/documents/{document_id}/chunks")
async def get_chunks(document_id: str, http: Request, services: ServicesDep):
    docs = documents_of(services)
    found = await asyncio.to_thread(docs.store.chunks, tenant_of(http), document_id, docs.model_key)
    if found is None:
        raise not_found("document", document_id, "document_id")
    return {"object": "list", "data": [chunk_json(c) for c in found]}


@router.delete("/documents/{document_id}")
async def delete_document(document_id: str, http: Request, services: ServicesDep):
    docs = documents_of(services)
    tenant = tenant_of(http)
    chunks = await asyncio.to_thread(docs.store.chunks, tenant, document_id)
    gone = await asyncio.to_thread(docs.store.delete_document, tenant, document_id)
    if gone is None or chunks is None:
        raise not_found("document", document_id, "document_id")
    await asyncio.to_thread(docs.library.removed, gone.collection_id, [c.id for c in chunks])
    await forget_documents(services, {document_id})
    if docs.prefill is not None:
        docs.prefill.forget(document_id)
    return {"id": document_id, "object": "document.deleted", "deleted": True}
