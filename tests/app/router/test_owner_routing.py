"""app/router/owner_routing.py on a real SQLite database: a request under a session, a
collection or a document that names no model goes to the model it remembers when that model is
served; to the default when it remembers none or the tenant has no such thing; and when its
model is not served, a request that runs a model is refused naming it while any other goes to
the default. (Through the real servers: tests/app/api/router/test_router_owners.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db.documents.document_store import DocumentStore
from app.db.remembered_models import RememberedModels
from app.db.store import Store
from app.router.model_catalog import ModelSpec
from app.router.model_router import ModelRouter, RouterError
from app.router.owner_routing import Owner, OwnerRouting, owner_of
from app.router.request_model import needs_model

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path}/t.db")
    s.migrate()
    yield s
    s.close()


def routing(store: Store) -> OwnerRouting:
    specs = {n: ModelSpec(n, f"/models/{n}.gguf") for n in ("smollm2", "twin")}
    never = ModelRouter(specs, 1, True, lambda spec: pytest.fail("nothing is loaded here"))
    return OwnerRouting(RememberedModels(store), never)


def test_the_paths_under_a_session_a_collection_or_a_document():
    assert owner_of("/v1/sessions/abc/messages") == Owner("session", "abc")
    assert owner_of("/v1/sessions/abc") == Owner("session", "abc")
    assert owner_of("/v1/collections/col-1/documents") == Owner("collection", "col-1")
    assert owner_of("/v1/collections/col-1/ask") == Owner("collection", "col-1")
    assert owner_of("/v1/documents/doc-1/chunks") == Owner("document", "doc-1")
    for path in ("/v1/sessions", "/v1/collections", "/v1/chat/completions", "/v1/media/x"):
        assert owner_of(path) is None
    # What runs a model: a turn, a regeneration, a question.
    assert needs_model("POST", "/v1/sessions/abc/messages")
    assert needs_model("POST", "/v1/sessions/abc/regenerate")
    assert needs_model("POST", "/v1/collections/col-1/ask")
    assert not needs_model("POST", "/v1/collections/col-1/search")
    assert not needs_model("PATCH", "/v1/sessions/abc")


async def test_a_session_goes_to_its_model_if_it_is_served(store: Store):
    owners = routing(store)
    twins = store.create_session(tenant_id="t", model="twin").id
    assert await owners.model_for(Owner("session", twins), "t", runs_model=True) == "twin"
    # Another tenant's session tells nothing: the default's server answers its 404.
    assert await owners.model_for(Owner("session", twins), "other", runs_model=True) is None
    old = store.create_session(tenant_id="t").id  # from before sessions had a model
    assert await owners.model_for(Owner("session", old), "t", runs_model=True) is None
    store.update_session(twins, model="retired")
    with pytest.raises(RouterError) as refused:
        await owners.model_for(Owner("session", twins), "t", runs_model=True)
    assert refused.value.status == 400 and "'retired' is not served" in str(refused.value)
    assert "PATCH" in str(refused.value)
    # Reading it, deleting it or moving it elsewhere goes to the default.
    assert await owners.model_for(Owner("session", twins), "t", runs_model=False) is None


async def test_a_collection_and_its_documents_go_to_its_model(store: Store):
    owners, docs = routing(store), DocumentStore(store)
    col = docs.create_collection("t", "c", 64, 8, None, model="twin").id
    doc, _ = docs.add_document(
        "t", col, filename="a", kind="text", sha256="a" * 64, text="x", page_starts=[],
        metadata={},
    )  # fmt: skip
    assert await owners.model_for(Owner("collection", col), "t", runs_model=True) == "twin"
    assert await owners.model_for(Owner("document", doc.id), "t", runs_model=False) == "twin"
    gone = docs.create_collection("t", "g", 64, 8, None, model="retired").id
    with pytest.raises(RouterError) as refused:
        await owners.model_for(Owner("collection", gone), "t", runs_model=True)
    assert "collection" in str(refused.value) and "'retired'" in str(refused.value)
