"""Collections: a tenant's named sets of documents, with their chunking, system prompt and
mode; created, listed, read, changed and deleted here. Each answer carries the state of the
collection's whole prefix (`full_prefix`, full-document mode).

Tenancy: every store call takes the caller's tenant; another tenant's collection answers 404
as if it did not exist (app/api/lookups.py).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.kvchat.doc_schemas import (
    CreateCollectionRequest,
    UpdateCollectionRequest,
    collection_json,
)
from app.api.lookups import CollectionDep, DocsDep, TenantDep
from app.api.services import ServicesDep
from app.docs.collection_edits import full_prefixes, update_collection
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
        body.mode,
    )
    [state] = await full_prefixes(docs, [c])
    return JSONResponse(collection_json(c, state), status_code=201)


@router.get("/collections")
async def list_collections(tenant: TenantDep, docs: DocsDep):
    found = await asyncio.to_thread(docs.store.list_collections, tenant)
    states = await full_prefixes(docs, found)
    data = [collection_json(c, s) for c, s in zip(found, states, strict=True)]
    return {"object": "list", "data": data}


@router.get("/collections/{collection_id}")
async def get_collection(collection: CollectionDep, docs: DocsDep):
    [state] = await full_prefixes(docs, [collection])
    return collection_json(collection, state)


@router.patch("/collections/{collection_id}")
async def patch_collection(
    collection: CollectionDep, body: UpdateCollectionRequest, tenant: TenantDep, docs: DocsDep
):
    c = await update_collection(docs, tenant, collection.id, body.changes())
    [state] = await full_prefixes(docs, [c])
    return collection_json(c, state)


@router.delete("/collections/{collection_id}")
async def delete_collection(
    collection_id: str, tenant: TenantDep, docs: DocsDep, services: ServicesDep
):
    await remove_collection(docs, services.engine, tenant, collection_id)
    return {"id": collection_id, "object": "collection.deleted", "deleted": True}
