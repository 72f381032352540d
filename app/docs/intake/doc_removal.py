"""Deleting collections and documents with everything built from them: the search index's
entries, the prefill records, and every cache tier's KV that holds their chunks.

Tenancy: every store call takes the tenant; another tenant's collection or document answers
404 as if it did not exist.
"""

from __future__ import annotations

import asyncio

from app.docs.doc_lookup import not_found
from app.docs.document_service import Documents
from app.engine.engine import Engine


async def delete_collection(
    docs: Documents, engine: Engine, tenant: str, collection_id: str
) -> None:
    gone = await asyncio.to_thread(docs.store.delete_collection, tenant, collection_id)
    if gone is None:
        raise not_found("collection", collection_id, "collection_id")
    docs.library.dropped(collection_id)
    await forget_documents(engine, set(gone))


async def delete_document(docs: Documents, engine: Engine, tenant: str, document_id: str) -> None:
    chunks = await asyncio.to_thread(docs.store.chunks, tenant, document_id)
    gone = await asyncio.to_thread(docs.store.delete_document, tenant, document_id)
    if gone is None or chunks is None:
        raise not_found("document", document_id, "document_id")
    await asyncio.to_thread(docs.library.removed, gone.collection_id, [c.id for c in chunks])
    await forget_documents(engine, {document_id})
    if docs.prefill is not None:
        docs.prefill.forget(document_id)
    if docs.full_prefill is not None:  # a full-mode collection's prefix, computed without it
        docs.full_prefill.changed(gone.collection_id)


async def forget_documents(engine: Engine, document_ids: set[str]) -> None:
    """No cache tier serves these documents' chunks again (host, disk, slots)."""
    if document_ids:
        await engine.forget_documents(document_ids)
