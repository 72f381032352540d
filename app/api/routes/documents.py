"""Documents (issue 11): collections, uploads ingested in the background, search, and
questions answered from retrieved chunks with citations (`/ask`).

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

from app.api.auth import cache_salt, tenant_of
from app.api.doc_schemas import (
    AskRequest,
    CreateCollectionRequest,
    SearchRequest,
    TextDocumentRequest,
    chunk_json,
    collection_json,
    document_json,
    hit_json,
)
from app.api.media_upload import MULTIPART_OVERHEAD
from app.api.responder import Reply, respond
from app.api.responses import ChatShape
from app.api.schemas import RagOptions
from app.api.services import Services, ServicesDep
from app.api.structured_output import finish_request
from app.db.document_records import CollectionRecord
from app.docs.chat_sources import citation, sources_part
from app.docs.documents import Documents
from app.docs.retrieval import lay_out, search
from app.engine.request import RequestError
from mm.token_sequence import TokenSequence
from rag.errors import DocumentError
from rag.loader import load

router = APIRouter(prefix="/v1")


def _not_found(kind: str, name: str, param: str) -> RequestError:
    return RequestError(
        f"{kind} {name!r} does not exist", param=param, code="not_found", status=404
    )


def _docs(services: Services) -> Documents:
    if services.documents is None:
        raise RequestError("documents are not available", code="unavailable", status=503)
    return services.documents


async def _collection(services: Services, http: Request, collection_id: str) -> CollectionRecord:
    docs = _docs(services)
    found = await asyncio.to_thread(docs.store.get_collection, tenant_of(http), collection_id)
    if found is None:
        raise _not_found("collection", collection_id, "collection_id")
    return found


# --- collections ----------------------------------------------------------------------------


@router.post("/collections", status_code=201)
async def create_collection(body: CreateCollectionRequest, http: Request, services: ServicesDep):
    docs = _docs(services)
    c = await asyncio.to_thread(
        docs.store.create_collection,
        tenant_of(http),
        body.name,
        body.chunk_tokens,
        body.overlap_tokens,
        body.system_prompt,
    )
    return JSONResponse(collection_json(c), status_code=201)


@router.get("/collections")
async def list_collections(http: Request, services: ServicesDep):
    found = await asyncio.to_thread(_docs(services).store.list_collections, tenant_of(http))
    return {"object": "list", "data": [collection_json(c) for c in found]}


@router.get("/collections/{collection_id}")
async def get_collection(collection_id: str, http: Request, services: ServicesDep):
    return collection_json(await _collection(services, http, collection_id))


@router.delete("/collections/{collection_id}")
async def delete_collection(collection_id: str, http: Request, services: ServicesDep):
    docs = _docs(services)
    gone = await asyncio.to_thread(docs.store.delete_collection, tenant_of(http), collection_id)
    if gone is None:
        raise _not_found("collection", collection_id, "collection_id")
    docs.library.dropped(collection_id)
    await _forget(services, set(gone))
    return {"id": collection_id, "object": "collection.deleted", "deleted": True}


async def _forget(services: Services, document_ids: set[str]) -> None:
    """No cache tier serves these documents' chunks again (host, disk, slots)."""
    if document_ids:
        engine = services.engine
        await asyncio.wrap_future(engine.call(lambda: engine.reuse.forget_documents(document_ids)))


# --- documents ------------------------------------------------------------------------------


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
    docs = _docs(services)
    await _collection(services, http, collection_id)
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
        raise _not_found("collection", collection_id, "collection_id")
    record, duplicate = found
    if not duplicate:
        docs.ingestor.submit(record.id)
    return JSONResponse(document_json(record, duplicate), status_code=202)


@router.get("/collections/{collection_id}/documents")
async def list_documents(collection_id: str, http: Request, services: ServicesDep):
    docs = _docs(services)
    found = await asyncio.to_thread(docs.store.list_documents, tenant_of(http), collection_id)
    if found is None:
        raise _not_found("collection", collection_id, "collection_id")
    data = [document_json(d, prefill=docs.prefill_state(d.id)) for d in found]
    return {"object": "list", "data": data}


@router.get("/documents/{document_id}")
async def get_document(document_id: str, http: Request, services: ServicesDep):
    docs = _docs(services)
    found = await asyncio.to_thread(docs.store.get_document, tenant_of(http), document_id)
    if found is None:
        raise _not_found("document", document_id, "document_id")
    return document_json(found, prefill=docs.prefill_state(found.id))


@router.get("/documents/{document_id}/chunks")
async def get_chunks(document_id: str, http: Request, services: ServicesDep):
    docs = _docs(services)
    found = await asyncio.to_thread(docs.store.chunks, tenant_of(http), document_id, docs.model_key)
    if found is None:
        raise _not_found("document", document_id, "document_id")
    return {"object": "list", "data": [chunk_json(c) for c in found]}


@router.delete("/documents/{document_id}")
async def delete_document(document_id: str, http: Request, services: ServicesDep):
    docs = _docs(services)
    tenant = tenant_of(http)
    chunks = await asyncio.to_thread(docs.store.chunks, tenant, document_id)
    gone = await asyncio.to_thread(docs.store.delete_document, tenant, document_id)
    if gone is None or chunks is None:
        raise _not_found("document", document_id, "document_id")
    await asyncio.to_thread(docs.library.removed, gone.collection_id, [c.id for c in chunks])
    await _forget(services, {document_id})
    if docs.prefill is not None:
        docs.prefill.forget(document_id)
    return {"id": document_id, "object": "document.deleted", "deleted": True}


# --- search and questions -------------------------------------------------------------------


async def rag_sources(
    services: Services, http: Request, options: RagOptions, query: str, seen: set[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The sources part of a chat message (`"rag"` option) and its citations: the best
    `top_k` chunks over the collections asked for."""
    docs = _docs(services)
    found: list[tuple[Any, float]] = []
    for collection_id in dict.fromkeys(options.collection_ids):
        await _collection(services, http, collection_id)
        hits = await search(
            docs,
            collection_id,
            query,
            options.top_k,
            options.score_threshold,
            options.document_ids,
            options.hybrid,
        )
        found.extend((c, hits.scores[c.id]) for c in hits.chunks)
    found.sort(key=lambda cs: (-cs[1], cs[0].id))
    return sources_part(found[: options.top_k], seen)


def with_citations(citations: list[dict[str, Any]]):  # noqa: ANN201
    """A reshape for chat replies: the message carries its citations."""

    def reshape(whole: dict[str, Any]) -> dict[str, Any]:
        for choice in whole["choices"]:
            choice["message"]["citations"] = citations
        return whole

    return reshape


@router.post("/collections/{collection_id}/search")
async def search_collection(
    collection_id: str, body: SearchRequest, http: Request, services: ServicesDep
):
    await _collection(services, http, collection_id)
    found = await search(
        _docs(services),
        collection_id,
        body.query,
        body.top_k,
        body.score_threshold,
        body.document_ids,
        body.hybrid,
    )
    return {"object": "list", "data": [hit_json(c, found.scores[c.id]) for c in found.chunks]}


def _answer_shape(whole: dict[str, Any]) -> dict[str, Any]:
    choice = whole["choices"][0]
    return {
        "id": whole["id"],
        "object": "collection.answer",
        "created": whole["created"],
        "model": whole["model"],
        "answer": choice["message"]["content"],
        "finish_reason": choice["finish_reason"],
        "citations": whole["citations"],
        "usage": whole["usage"],
        "timings": whole["timings"],
    }


@router.post("/collections/{collection_id}/ask")
async def ask(collection_id: str, body: AskRequest, http: Request, services: ServicesDep):
    collection = await _collection(services, http, collection_id)
    docs = _docs(services)
    found = await search(
        docs,
        collection_id,
        body.question,
        body.top_k,
        body.score_threshold,
        body.document_ids,
        body.hybrid,
    )
    head, tail = docs.prompts.parts(collection.system_prompt, body.question)
    # The tenant's salt, as on every other route: the layout asks the caches under it, and the
    # KV this question builds is never a prefix for another tenant.
    salt = cache_salt(http, body.cache_salt)
    question = await lay_out(services.engine, head, tail, found, salt)
    request = body.generation(
        TokenSequence(question.layout.tokens),
        services.settings.seed,
        documents=question.documents,
    )
    await finish_request(request, body, salt, "question")
    citations = [citation(c, question.scores[c.id]) for c in question.chunks]
    reply = Reply(
        ChatShape,
        "ask",
        prelude={"citations": citations},
        timings={"retrieval_ms": round(question.retrieval_ms, 3)},
        reshape=_answer_shape,
    )
    return await respond(services, request, body, reply, http)
