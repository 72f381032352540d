"""Documents: uploads to a collection, ingested (chunked, embedded) in the
background; read back with their chunks, and deleted with everything cached from them.

Tenancy: every store call takes the caller's tenant; another tenant's collection or document
answers 404 as if it did not exist (app/api/lookups.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.kvchat.doc_schemas import chunk_json, document_json
from app.api.kvchat.document_upload import read_document
from app.api.lookups import ChunksDep, CollectionDep, DocsDep, DocumentDep, TenantDep
from app.api.services import ServicesDep
from app.docs.doc_lookup import documents_in
from app.docs.intake.doc_intake import take_in
from app.docs.intake.doc_removal import delete_document as remove_document

router = APIRouter(prefix="/v1")


@router.post("/collections/{collection_id}/documents", status_code=202)
async def add_document(collection: CollectionDep, http: Request, tenant: TenantDep, docs: DocsDep):
    upload = await read_document(http, docs.max_bytes)
    record, duplicate = await take_in(docs, tenant, collection.id, upload)
    return JSONResponse(document_json(record, duplicate), status_code=202)


@router.get("/collections/{collection_id}/documents")
async def list_documents(collection_id: str, tenant: TenantDep, docs: DocsDep):
    found = await documents_in(docs, tenant, collection_id)
    data = [
        document_json(d, prefill=docs.prefill_state(d.id), kv=docs.kv_progress(d.id)) for d in found
    ]
    return {"object": "list", "data": data}


@router.get("/documents/{document_id}")
async def get_document(document: DocumentDep, docs: DocsDep):
    state, kv = docs.prefill_state(document.id), docs.kv_progress(document.id)
    return document_json(document, prefill=state, kv=kv)


@router.get("/documents/{document_id}/chunks")
async def get_chunks(chunks: ChunksDep):
    return {"object": "list", "data": [chunk_json(c) for c in chunks]}


@router.delete("/documents/{document_id}")
async def delete_document(
    document_id: str, tenant: TenantDep, docs: DocsDep, services: ServicesDep
):
    await remove_document(docs, services.engine, tenant, document_id)
    return {"id": document_id, "object": "document.deleted", "deleted": True}
