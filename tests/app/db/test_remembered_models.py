"""RememberedModels on SQLite and PostgreSQL: the model a tenant's session, collection or
document (its collection's) remembers; another tenant's, or an id that names nothing, is not
found."""

from __future__ import annotations

from app.db.documents.document_store import DocumentStore
from app.db.remembered_models import Remembered, RememberedModels
from app.db.store import Store


def test_the_model_a_session_a_collection_and_a_document_remember(store: Store):
    docs, models = DocumentStore(store), RememberedModels(store)
    session = store.create_session(tenant_id="t1", model="twin")
    old_session = store.create_session(tenant_id="t1")
    col = docs.create_collection("t1", "c", 64, 8, None, model="smollm2")
    doc, _ = docs.add_document(
        "t1", col.id, filename="a", kind="text", sha256="a" * 64, text="x", page_starts=[],
        metadata={},
    )  # fmt: skip
    assert models.model_of("session", session.id, "t1") == Remembered("twin")
    assert models.model_of("session", old_session.id, "t1") == Remembered(None)
    assert models.model_of("collection", col.id, "t1") == Remembered("smollm2")
    assert models.model_of("document", doc.id, "t1") == Remembered("smollm2")
    # Another tenant's is not there; nor what no id names.
    for kind, object_id in (("session", session.id), ("collection", col.id), ("document", doc.id)):
        assert models.model_of(kind, object_id, "t2") is None
        assert models.model_of(kind, "nope", "t1") is None
    assert models.model_of("session", "x" * 100_000, "t1") is None
