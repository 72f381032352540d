"""Sessions and collections remember their model, through a real router: `--models-dir` with
the packaged model and its twin (the same tokenizer, random weights: bench/lib/twin_model.py),
both loaded at once, on the router's one database. A session made for the twin has its turns
served by the twin without naming it, and follows a PATCH to the other model; a session whose
model is gone is refused naming it; a collection made for the twin has its documents ingested
by the twin's server even when the upload reached the other model's (which must not take it:
it would chunk in its own model's tokens), and its questions answered by the twin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from app.cache.state_file import cached_fingerprint
from app.db.documents.document_models import Collection
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from bench.lib.server_process import ServerProcess
from bench.lib.twin_model import twin_model
from tests.eventually import eventually

pytestmark = pytest.mark.slow  # model servers start (make test-fast leaves it out)

VOLCANO = "Mount Etna is an active volcano in Sicily. Its eruptions send lava down its slopes."


@pytest.fixture(scope="module")
def models_dir(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    (folder / "smollm2.gguf").symlink_to(model_path)
    (folder / "twin.gguf").symlink_to(twin_model())
    return folder


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("router-data")


@pytest.fixture(scope="module")
def router(models_dir: Path, data_dir: Path) -> Iterator[ServerProcess]:
    args = ("--models-dir", str(models_dir), "--models-max", "2", "--data-dir", str(data_dir))
    args += ("-np", "2", "-c", "4096", "--doc-prefill-tokens", "0")
    with ServerProcess(*args) as server:
        yield server


@pytest.fixture(scope="module")
def store(router: ServerProcess, data_dir: Path) -> Iterator[Store]:
    """The router's database, which the models' servers share."""
    s = Store(f"sqlite:///{data_dir}/kvchat.db")
    yield s
    s.close()


def call(server: ServerProcess, method: str, path: str, body: dict | None = None):
    return httpx.request(method, server.base_url + path, json=body, timeout=300)


def last_used(server: ServerProcess, model: str) -> None:
    """A chat on `model`: the router's default (the model used last) is now that one."""
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    assert call(server, "POST", "/v1/chat/completions", body).status_code == 200


def turn(server: ServerProcess, sid: str, **fields: object) -> httpx.Response:
    body = {"content": "Hello there", "max_tokens": 4, "temperature": 0, **fields}
    return call(server, "POST", f"/v1/sessions/{sid}/messages", body)


def test_a_session_s_turns_go_to_its_model_without_naming_it(router: ServerProcess):
    last_used(router, "smollm2")
    r = call(router, "POST", "/v1/sessions", {"model": "twin", "title": "twin's"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = turn(router, sid)
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "twin"  # not the router's default, smollm2
    assert call(router, "GET", f"/v1/sessions/{sid}").json()["model"] == "twin"
    # Moved to the other model: its turns go there from now on.
    last_used(router, "twin")
    r = call(router, "PATCH", f"/v1/sessions/{sid}", {"model": "smollm2"})
    assert r.status_code == 200 and r.json()["model"] == "smollm2", r.text
    r = turn(router, sid)
    assert r.status_code == 200 and r.json()["model"] == "smollm2", r.text
    got = call(router, "GET", f"/v1/sessions/{sid}").json()
    assert got["model"] == "smollm2" and got["n_messages"] == 4


def test_a_session_whose_model_is_gone_is_refused_naming_it(
    router: ServerProcess, store: Store
) -> None:
    sid = call(router, "POST", "/v1/sessions", {"model": "twin"}).json()["id"]
    store.update_session(sid, model="retired")  # a model the router no longer serves
    r = turn(router, sid)
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"
    assert "'retired' is not served" in r.json()["error"]["message"]
    assert call(router, "GET", f"/v1/sessions/{sid}").json()["model"] == "retired"
    r = turn(router, sid, model="twin")  # a turn that names one goes there
    assert r.status_code == 200 and r.json()["model"] == "twin", r.text
    r = call(router, "PATCH", f"/v1/sessions/{sid}", {"model": "twin"})
    assert r.status_code == 200 and r.json()["model"] == "twin"
    assert turn(router, sid).json()["model"] == "twin"


def test_a_collection_s_documents_are_ingested_by_its_model_s_server(
    router: ServerProcess, store: Store, model_path: str
) -> None:
    r = call(router, "POST", "/v1/collections", {"name": "twin's", "model": "twin"})
    assert r.status_code == 201, r.text
    col = r.json()["id"]
    # The upload reaches the other model's server (the request names it), whose worker it wakes.
    upload = {"filename": "etna.txt", "text": VOLCANO}
    r = call(router, "POST", f"/v1/collections/{col}/documents?model=smollm2", upload)
    assert r.status_code == 202, r.text
    doc = r.json()["id"]

    def ingested() -> dict | None:
        got = call(router, "GET", f"/v1/documents/{doc}").json()
        return got if got["status"] in ("ready", "error") else None

    assert eventually(ingested, "the document ingested")["status"] == "ready"
    # Its chunks were cut and tokenized by the twin: their token ids are stored under the
    # twin's file fingerprint, none under the other model's.
    docs = DocumentStore(store)
    twins = docs.chunks("", doc, cached_fingerprint(str(twin_model())))
    others = docs.chunks("", doc, cached_fingerprint(model_path))
    assert twins and all(c.token_ids for c in twins)
    assert [c.token_ids for c in others] == [None] * len(others)
    # Its questions go to the twin too, without naming it.
    last_used(router, "smollm2")
    r = call(
        router,
        "POST",
        f"/v1/collections/{col}/ask",
        {"question": "Where is Etna?", "max_tokens": 4},
    )
    assert r.status_code == 200 and r.json()["model"] == "twin", r.text
    assert call(router, "GET", f"/v1/collections/{col}").json()["model"] == "twin"


def test_a_collection_from_before_models_becomes_the_model_s_its_upload_reaches(
    router: ServerProcess, store: Store
) -> None:
    """No model's server claims the documents of a collection without a model (which model's
    tokens?): the first upload makes it the model's whose server takes the upload in."""
    col = call(router, "POST", "/v1/collections", {"name": "older", "model": "twin"}).json()["id"]
    with store.transaction(write=True) as s:
        s.execute(update(Collection).where(Collection.id == col).values(model=None))
    assert call(router, "GET", f"/v1/collections/{col}").json()["model"] is None
    last_used(router, "smollm2")  # the router's default takes the upload
    upload = {"filename": "etna.txt", "text": VOLCANO}
    r = call(router, "POST", f"/v1/collections/{col}/documents", upload)
    assert r.status_code == 202, r.text
    doc = r.json()["id"]

    def ingested() -> dict | None:
        got = call(router, "GET", f"/v1/documents/{doc}").json()
        return got if got["status"] in ("ready", "error") else None

    assert eventually(ingested, "the document ingested")["status"] == "ready"
    assert call(router, "GET", f"/v1/collections/{col}").json()["model"] == "smollm2"
