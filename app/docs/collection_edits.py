"""A collection's mutable fields changed (PATCH /v1/collections/{id}), and the state of its whole
prefix (full-document mode) as its JSON reports it.

Tenancy: the store call takes the tenant; another tenant's collection answers 404 as if it did
not exist.
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.db.documents.document_records import CollectionRecord
from app.docs.background.collection_prefill import FullPrefixStatus
from app.docs.doc_lookup import not_found
from app.docs.document_service import Documents


async def update_collection(
    docs: Documents, tenant: str, collection_id: str, changes: dict[str, Any]
) -> CollectionRecord:
    """The collection with `changes` made; a collection switched to full mode gets its whole
    prefix computed in the background."""
    found = await asyncio.to_thread(docs.store.update_collection, tenant, collection_id, changes)
    if found is None:
        raise not_found("collection", collection_id, "collection_id")
    if docs.full_prefill is not None and found.mode == "full":
        docs.full_prefill.changed(found.id)
    return found


async def full_prefixes(
    docs: Documents, collections: list[CollectionRecord]
) -> list[FullPrefixStatus | None]:
    """Each collection's whole prefix now (None: this server computes none)."""
    prefill = docs.full_prefill
    if prefill is None:
        return [None] * len(collections)

    return list(await asyncio.to_thread(prefill.statuses, collections))  # database and engine
