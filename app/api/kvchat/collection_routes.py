"""Collections: a tenant's named sets of documents, with their chunking and system
prompt; created, listed, read and deleted here.

Tenancy: every store call takes the caller's tenant; another tenant's collection answers 404
as if it did not exist (app/api/lookups.py).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.kvchat.doc_schemas import CreateCollectionRequest, collection_json
from app.api.lookups import CollectionDep, DocsDep, TenantDep
from app.api.services import ServicesDep
from app.docs.intake.doc_removal import delete_collection as remove_collection

router = APIRouter(prefix="/v1")


@router.post("/collections", status_code=201)
async def create_collection(
    body: CreateCollectionRequest, tenant: TenantDep, docs: DocsDep, services: ServicesDep
):
    model = services.remembered_model(body.model)
    c = await asyncio.to_thread(
        docs.store.create_collection,
        tenant,
        body.name,
        body.chunk_tokens,
        body.overlap_tokens,
        body.system_prompt,
        body.kv_reuse,
        model,
    )
    return JSONResponse(collection_json(c), status_code=201)


@router.get("/collections")
async def list_collections(tenant: TenantDep, docs: DocsDep):
    found = await asyncio.to_thread(docs.store.list_collections, tenant)
    return {"object": "list", "data": [collection_json(c) for c in found]}


@router.get("/collections/{collection_id}")
async def get_collection(collection: CollectionDep):
    return collection_json(collection)


@router.delete("/collections/{collection_id}")
async def delete_collection(
    collection_id: str, tenant: TenantDep, docs: DocsDep, services: ServicesDep
):
    await remove_collection(docs, services.engine, tenant, collection_id)
    return {"id": collection_id, "object": "collection.deleted", "deleted": True}
