"""Collections (issue 11): a tenant's named sets of documents, with their chunking and system
prompt; created, listed, read and deleted here.

The lookups every documents route shares live here too: the documents service
(`documents_of`, 503 when the server has none), the tenant's collection (`load_collection`) and
the 404 they answer (`not_found`). Tenancy: every store call takes `tenant_of(request)`; another
tenant's collection or document answers 404 as if it did not exist.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.auth import tenant_of
from app.api.doc_schemas import CreateCollectionRequest, collection_json
from app.api.services import Services, ServicesDep
from app.db.document_records import CollectionRecord
from app.docs.documents import Documents
from app.engine.request import RequestError

router = APIRouter(prefix="/v1")


def not_found(kind: str, name: str, param: str) -> RequestError:
    """404 for a collection or document that this tenant does not have."""
    return RequestError(
        f"{kind} {name!r} does not exist", param=param, code="not_found", status=404
    )


def documents_of(services: Services) -> Documents:
    """The documents service; 503 on a server that has none."""
    if services.documents is None:
        raise RequestError("documents are not available", code="unavailable", status=503)
    return services.documents


async def load_collection(
    services: Services, http: Request, collection_id: str
) -> CollectionRecord:
    """The tenant's collection; another tenant's is "not found"."""
    docs = documents_of(services)
    found = await asyncio.to_thread(docs.store.get_collection, tenant_of(http), collection_id)
    if found is None:
        raise not_found("collection", collection_id, "collection_id")
    return found


async def forget_documents(services: Services, document_ids: set[str]) -> None:
    """No cache tier serves these documents' chunks again (host, disk, slots)."""
    if document_ids:
        await services.engine.forget_documents(document_ids)


@router.post("/collections", status_code=201)
async def create_collection(body: CreateCollectionRequest, http: Request, services: ServicesDep):
    docs = documents_of(services)
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
    found = await asyncio.to_thread(documents_of(services).store.list_collections, tenant_of(http))
    return {"object": "list", "data": [collection_json(c) for c in found]}


@router.get("/collections/{collection_id}")
async def get_collection(collection_id: str, http: Request, services: ServicesDep):
    return collection_json(await load_collection(services, http, collection_id))


@router.delete("/collections/{collection_id}")
async def delete_collection(collection_id: str, http: Request, services: ServicesDep):
    docs = documents_of(services)
    gone = await asyncio.to_thread(docs.store.delete_collection, tenant_of(http), collection_id)
    if gone is None:
        raise not_found("collection", collection_id, "collection_id")
    docs.library.dropped(collection_id)
    await forget_documents(services, set(gone))
    return {"id": collection_id, "object": "collection.deleted", "deleted": True}
