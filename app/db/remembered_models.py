"""`RememberedModels`: the model a tenant's session or collection remembers (the name of the
model whose server made it, app/db/models.py `Conversation.model`, app/db/documents
`Collection.model`), and a document's, which is its collection's.

The router reads it (app/router/owner_routing.py) to send a request under the session, the
collection or the document that names no model to that model's server. Another tenant's session
or collection is not found here, as everywhere: the router then tells nothing of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import select

from app.db.documents.document_models import Collection, Document
from app.db.models import Conversation
from app.db.store import Store

Kind = Literal["session", "collection", "document"]
LONGEST_ID = 64  # every id column's size: a longer one names nothing


@dataclass(slots=True, frozen=True)
class Remembered:
    model: str | None  # None: made before sessions and collections had a model


class RememberedModels:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    def model_of(self, kind: Kind, object_id: str, tenant_id: str) -> Remembered | None:
        """What the tenant's session, collection or document remembers; None if the tenant
        has no such thing."""
        if len(object_id) > LONGEST_ID:
            return None
        if kind == "session":
            owner, column = Conversation.tenant_id, Conversation.model
            query = select(owner, column).where(Conversation.id == object_id)
        else:
            query = select(Collection.tenant_id, Collection.model)
            if kind == "collection":
                query = query.where(Collection.id == object_id)
            else:
                query = query.join(Document, Document.collection_id == Collection.id).where(
                    Document.id == object_id
                )
        with self._tx() as s:
            row = s.execute(query).first()
        if row is None or row[0] != tenant_id:
            return None
        return Remembered(row[1])
