"""Full-document mode's prefix reused by questions alone (a real server that computes nothing in
the background): a document added goes at the end, so the next question computes only it; every
key of the tenant reuses the prefix, another tenant never does."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess, make_key
from tests.app.api.keyed_server import KeyedServer
from tests.app.api.kvchat.test_full_mode import FACTS, cached_tokens
from tests.eventually import eventually


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> Iterator[KeyedServer]:
    """Tenant alice with two keys, tenant bob; nothing computed in the background, so that what
    is cached is what questions computed."""
    data = tmp_path_factory.mktemp("keyed")
    keys = {
        "alice": make_key(data, "alice"),
        "alice2": make_key(data, "alice-laptop", "--tenant", "alice"),
        "bob": make_key(data, "bob"),
    }
    args = ["-np", "2", "-c", "2048", "--data-dir", str(data), "--doc-prefill-tokens", "0"]
    with ServerProcess(*args, "--no-doc-full-prefill") as srv:
        yield KeyedServer(srv, data, keys)


def as_tenant(keyed: KeyedServer, who: str, method: str, path: str, **kw) -> httpx.Response:
    return httpx.request(method, keyed.url + path, headers=keyed.auth(who), timeout=180, **kw)


def tenant_collection(keyed: KeyedServer, who: str, mode: str, names: list[str]) -> str:
    r = as_tenant(keyed, who, "POST", "/v1/collections", json={"name": "c", "mode": mode})
    assert r.status_code == 201, r.text
    col = r.json()["id"]
    for name in names:
        tenant_upload(keyed, who, col, name, FACTS[name])
    return col


def tenant_upload(keyed: KeyedServer, who: str, col: str, name: str, text: str) -> str:
    body = {"filename": name, "text": text}
    r = as_tenant(keyed, who, "POST", f"/v1/collections/{col}/documents", json=body)
    assert r.status_code == 202, r.text
    doc = r.json()["id"]

    def ready() -> bool:
        status = as_tenant(keyed, who, "GET", f"/v1/documents/{doc}").json()["status"]
        assert status != "error"
        return status == "ready"

    eventually(ready, f"{doc} to be ingested")
    return doc


def tenant_ask(keyed: KeyedServer, who: str, col: str, **body) -> dict:
    fields = {"question": "What is in the harbour?", "max_tokens": 2, "temperature": 0, **body}
    r = as_tenant(keyed, who, "POST", f"/v1/collections/{col}/ask", json=fields)
    assert r.status_code == 200, r.text
    return r.json()


def full_prefix(keyed: KeyedServer, who: str, col: str) -> dict:
    return as_tenant(keyed, who, "GET", f"/v1/collections/{col}").json()["full_prefix"]


def test_a_document_added_to_a_full_collection_computes_only_the_new_tail(keyed):
    col = tenant_collection(keyed, "alice", "full", ["harbour.txt", "orchard.txt"])
    # Nothing computes it in the background on this server: the first question does.
    assert full_prefix(keyed, "alice", col)["state"] == "empty"
    first = tenant_ask(keyed, "alice", col)
    old = full_prefix(keyed, "alice", col)
    assert old["state"] == "cached" and old["cached_tokens"] >= old["tokens"]
    tenant_upload(keyed, "alice", col, "mill.txt", FACTS["mill.txt"])
    new = full_prefix(keyed, "alice", col)
    assert new["tokens"] > old["tokens"]
    # The new document went at the end: all of the old prefix is still the new one's start.
    assert new["cached_tokens"] >= old["tokens"]
    answer = tenant_ask(keyed, "alice", col)
    assert answer["usage"]["prompt_tokens"] > first["usage"]["prompt_tokens"]
    assert cached_tokens(answer) >= old["tokens"]
    computed = answer["usage"]["prompt_tokens"] - cached_tokens(answer)
    assert computed < new["tokens"] - old["tokens"] + 40  # the new document and the question


def test_every_key_of_the_tenant_reuses_the_prefix_and_another_tenant_does_not(keyed):
    names = ["harbour.txt", "mill.txt"]
    col = tenant_collection(keyed, "alice", "full", names)
    tenant_ask(keyed, "alice", col)  # computes the prefix
    tokens = full_prefix(keyed, "alice", col)["tokens"]
    for who in ("alice", "alice2"):
        assert cached_tokens(tenant_ask(keyed, who, col)) >= tokens
    assert as_tenant(keyed, "bob", "GET", f"/v1/collections/{col}").status_code == 404
    assert as_tenant(keyed, "bob", "POST", f"/v1/collections/{col}/ask", json={}).status_code == 404
    # Bob's collection of the same documents makes the very same tokens, but none of alice's
    # KV: he computes it himself.
    theirs = tenant_collection(keyed, "bob", "retrieval", names)
    assert full_prefix(keyed, "bob", theirs)["tokens"] == tokens
    assert full_prefix(keyed, "bob", theirs)["cached_tokens"] == 0
    answer = tenant_ask(keyed, "bob", theirs, mode="full")
    assert answer["mode"] == "full" and cached_tokens(answer) == 0
