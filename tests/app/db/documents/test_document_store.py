"""DocumentStore on SQLite and PostgreSQL: tenants and duplicates."""

from __future__ import annotations

from app.db.documents.document_store import DocumentStore
from app.db.store import Store


def add(docs: DocumentStore, tenant: str, col: str, sha: str, name: str = "a.txt"):
    return docs.add_document(
        tenant,
        col,
        filename=name,
        kind="text",
        sha256=sha * 64,
        text="hello world",
        page_starts=[],
        metadata={"k": 1},
    )


def test_tenants_see_only_their_own(store: Store):
    docs = DocumentStore(store)
    mine = docs.create_collection("t1", "mine", 64, 8, None)
    docs.create_collection("t2", "theirs", 64, 8, "be brief")
    assert [c.name for c in docs.list_collections("t1")] == ["mine"]
    assert docs.get_collection("t2", mine.id) is None
    assert add(docs, "t2", mine.id, "a") is None
    doc, duplicate = add(docs, "t1", mine.id, "a")
    assert not duplicate and doc.status == "queued" and doc.metadata == {"k": 1}
    assert docs.get_document("t2", doc.id) is None
    assert docs.delete_document("t2", doc.id) is None
    assert docs.delete_collection("t2", mine.id) is None
    assert docs.get_document("t1", doc.id) is not None


def test_same_content_is_one_document_per_collection(store: Store):
    docs = DocumentStore(store)
    a = docs.create_collection("", "a", 64, 8, None)
    b = docs.create_collection("", "b", 64, 8, None)
    first, _ = add(docs, "", a.id, "c")
    again, duplicate = add(docs, "", a.id, "c", name="other.txt")
    assert duplicate and again.id == first.id
    elsewhere, duplicate = add(docs, "", b.id, "c")
    assert not duplicate and elsewhere.id != first.id


def test_a_collection_keeps_its_kv_reuse(store: Store):
    docs = DocumentStore(store)
    blends = docs.create_collection("t1", "blends", 64, 8, None, kv_reuse="blend")
    plain = docs.create_collection("t1", "plain", 64, 8, None)
    assert blends.kv_reuse == "blend" and plain.kv_reuse is None
    assert docs.get_collection("t1", blends.id).kv_reuse == "blend"
    assert docs.get_collection("t1", plain.id).kv_reuse is None
    listed = {c.name: c.kv_reuse for c in docs.list_collections("t1")}
    assert listed == {"blends": "blend", "plain": None}


def upload(docs: DocumentStore, col: str, sha: str, adopt_model: str | None) -> None:
    meta: dict = {}
    docs.add_document(
        "t1", col, filename=sha, kind="text", sha256=sha * 64, text="x", page_starts=[],
        metadata=meta, adopt_model=adopt_model,
    )  # fmt: skip


def test_a_collection_remembers_its_model_and_one_without_is_adopted(store: Store):
    docs = DocumentStore(store)
    twin = docs.create_collection("t1", "twin's", 64, 8, None, model="twin")
    old = docs.create_collection("t1", "from before models", 64, 8, None)
    assert twin.model == "twin" and docs.get_collection("t1", twin.id).model == "twin"
    assert old.model is None
    listed = {c.name: c.model for c in docs.list_collections("t1")}
    assert listed == {"twin's": "twin", "from before models": None}
    # An upload adopts a collection that has no model for the server's, never another's.
    upload(docs, twin.id, "a", adopt_model="smollm2")
    assert docs.get_collection("t1", twin.id).model == "twin"
    upload(docs, old.id, "b", adopt_model=None)
    assert docs.get_collection("t1", old.id).model is None  # adopted only when asked
    upload(docs, old.id, "c", adopt_model="smollm2")
    assert docs.get_collection("t1", old.id).model == "smollm2"
    upload(docs, old.id, "d", adopt_model="twin")  # the first adoption stands
    assert docs.get_collection("t1", old.id).model == "smollm2"
