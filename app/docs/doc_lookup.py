"""A tenant's collections and documents by id, and the 404 that answers when there is none.

Every lookup takes the tenant: another tenant's collection or document answers 404 as if it
did not exist. Store calls run in a worker thread (database I/O off the event loop).
"""

from __future__ import annotations

import asyncio

from app.db.documents.document_records import ChunkRecord, CollectionRecord, DocumentRecord
from app.docs.document_service import Documents
from app.engine.request import RequestError


def not_found(kind: str, name: str, param: str) -> RequestError:
    """404 for a collection or document that this tenant does not have."""
    return RequestError(
        f"{kind} {name!r} does not exist", param=param, code="not_found", status=404
    )


async def load_collection(docs: Documents, tenant: str, collection_id: str) -> CollectionRecord:
    found = await asyncio.to_thread(docs.store.get_collection, tenant, collection_id)
    if found is None:
        raise not_found("collection", collection_id, "collection_id")
    return found


async def load_document(docs: Documents, tenant: str, document_id: str) -> DocumentRecord:
    found = await asyncio.to_thread(docs.store.get_document, tenant, document_id)
    if found is None:
        raise not_found("document", document_id, "document_id")
    return found


async def load_chunks(docs: Documents, tenant: str, document_id: str) -> list[ChunkRecord]:
    """A document's chunks, with their token ids for the chat model where stored."""
    found = await asyncio.to_thread(docs.store.chunks, tenant, document_id, docs.model_key)
    if found is None:
        raise not_found("document", document_id, "document_id")
    return found


async def documents_in(docs: Documents, tenant: str, collection_id: str) -> list[DocumentRecord]:
    found = await asyncio.to_thread(docs.store.list_documents, tenant, collection_id)
    if found is None:
        raise not_found("collection", collection_id, "collection_id")
    return found
