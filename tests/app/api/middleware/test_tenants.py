"""The cross-tenant probe: a tenant cannot see another's cached prefixes (cached_tokens is 0
for it, whatever cache_salt it sends), sessions or media."""

from __future__ import annotations

import io

import httpx
from PIL import Image
from sqlalchemy import select

from app.api.middleware.auth import tenant_salt
from app.db.models import MediaBytes
from app.db.store import Store
from tests.app.api.keyed_server import KeyedServer
from tests.eventually import eventually

SECRET = (
    "Internal memo for the board only. Project Falcon will be cancelled next quarter; the "
    "budget moves to the payments team, and the three people on Falcon will be offered roles "
    "in search or in billing. Do not share this before the all-hands meeting on Friday. "
)


def chat(keyed: KeyedServer, who: str, salt: str | None = None) -> dict:
    body = {
        "messages": [{"role": "system", "content": SECRET}, {"role": "user", "content": "Ok?"}],
        "max_tokens": 1,
        "temperature": 0,
    }
    if salt is not None:
        body["cache_salt"] = salt
    r = httpx.post(
        keyed.url + "/v1/chat/completions", json=body, headers=keyed.auth(who), timeout=120
    )
    assert r.status_code == 200, r.text
    return r.json()["usage"]


def test_another_tenant_gets_no_cached_tokens_for_a_cached_prefix(keyed: KeyedServer):
    first = chat(keyed, "alice")
    assert first["prompt_tokens"] > 60
    assert chat(keyed, "alice")["prompt_tokens_details"]["cached_tokens"] > 60  # cached for A
    assert chat(keyed, "bob")["prompt_tokens_details"]["cached_tokens"] == 0
    # A client salt only subdivides the tenant's own: not even alice's derived salt reaches it.
    forged = chat(keyed, "bob", salt=tenant_salt("alice"))
    assert forged["prompt_tokens_details"]["cached_tokens"] == 0
    assert chat(keyed, "bob", salt="")["prompt_tokens_details"]["cached_tokens"] > 60


def test_another_tenant_cannot_list_read_write_or_delete_a_session(keyed: KeyedServer):
    a, b = keyed.auth("alice"), keyed.auth("bob")
    sid = httpx.post(keyed.url + "/v1/sessions", json={"title": "mine"}, headers=a).json()["id"]
    listed = httpx.get(keyed.url + "/v1/sessions", headers=b).json()["data"]
    assert sid not in [s["id"] for s in listed]
    assert httpx.get(f"{keyed.url}/v1/sessions/{sid}", headers=b).status_code == 404
    turn = httpx.post(f"{keyed.url}/v1/sessions/{sid}/messages", json={"content": "x"}, headers=b)
    assert turn.status_code == 404
    chat_body = {"messages": [{"role": "user", "content": "x"}], "session_id": sid}
    assert (
        httpx.post(keyed.url + "/v1/chat/completions", json=chat_body, headers=b).status_code == 404
    )
    assert httpx.delete(f"{keyed.url}/v1/sessions/{sid}", headers=b).status_code == 404
    mine = httpx.get(f"{keyed.url}/v1/sessions/{sid}", headers=a)
    assert mine.status_code == 200 and mine.json()["n_messages"] == 0
    assert sid in [s["id"] for s in httpx.get(keyed.url + "/v1/sessions", headers=a).json()["data"]]


def stored_media(keyed: KeyedServer) -> set[str]:
    """Ids of the media whose bytes the server's database holds."""
    store = Store(f"sqlite:///{keyed.data_dir / 'kvchat.db'}")
    try:
        with store.transaction() as s:
            return set(s.scalars(select(MediaBytes.media_id)))
    finally:
        store.close()


def png(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(out, "PNG")
    return out.getvalue()


def test_another_tenant_cannot_read_or_delete_media_and_delete_frees_it(keyed: KeyedServer):
    a, b = keyed.auth("alice"), keyed.auth("bob")
    up = httpx.post(
        keyed.url + "/v1/media", content=png((1, 2, 3)), headers={**a, "Content-Type": "image/png"}
    )
    assert up.status_code == 201, up.text
    mid = up.json()["id"]
    for path in (f"/v1/media/{mid}", f"/v1/media/{mid}/content"):
        assert httpx.get(keyed.url + path, headers=b).status_code == 404
        assert httpx.get(keyed.url + path, headers=a).status_code == 200
    assert httpx.delete(f"{keyed.url}/v1/media/{mid}", headers=b).status_code == 404
    assert stored_media(keyed) == {mid}
    assert httpx.delete(f"{keyed.url}/v1/media/{mid}", headers=a).status_code == 200
    assert httpx.get(f"{keyed.url}/v1/media/{mid}", headers=a).status_code == 404
    assert stored_media(keyed) == set()  # nothing else used it: its bytes are gone


def wait_ready(keyed: KeyedServer, auth: dict[str, str], document_id: str) -> None:
    def ingested() -> dict | None:
        state = httpx.get(f"{keyed.url}/v1/documents/{document_id}", headers=auth).json()
        return state if state["status"] in ("ready", "error") else None

    state = eventually(ingested, f"document {document_id} to be ingested")
    assert state["status"] == "ready", state


def test_another_tenant_cannot_see_search_ask_or_delete_a_collection_or_its_documents(
    keyed: KeyedServer,
):
    a, b = keyed.auth("alice"), keyed.auth("bob")
    col = httpx.post(keyed.url + "/v1/collections", json={"name": "memos"}, headers=a)
    assert col.status_code == 201, col.text
    cid = col.json()["id"]
    doc = httpx.post(
        f"{keyed.url}/v1/collections/{cid}/documents",
        json={"filename": "memo.txt", "text": SECRET},
        headers=a,
    )
    assert doc.status_code == 202, doc.text
    did = doc.json()["id"]
    wait_ready(keyed, a, did)
    listed = httpx.get(keyed.url + "/v1/collections", headers=b).json()["data"]
    assert cid not in [c["id"] for c in listed]
    for path in (
        f"/v1/collections/{cid}",
        f"/v1/collections/{cid}/documents",
        f"/v1/documents/{did}",
        f"/v1/documents/{did}/chunks",
    ):
        assert httpx.get(keyed.url + path, headers=b).status_code == 404, path
        assert httpx.get(keyed.url + path, headers=a).status_code == 200, path
    query = {"query": "Project Falcon budget"}
    assert (
        httpx.post(f"{keyed.url}/v1/collections/{cid}/search", json=query, headers=b).status_code
        == 404
    )
    ask = {"question": "What happens to Falcon?", "max_tokens": 1}
    assert (
        httpx.post(f"{keyed.url}/v1/collections/{cid}/ask", json=ask, headers=b).status_code == 404
    )
    rag_chat = {
        "messages": [{"role": "user", "content": "What happens to Falcon?"}],
        "max_tokens": 1,
        "rag": {"collection_ids": [cid]},
    }
    r = httpx.post(keyed.url + "/v1/chat/completions", json=rag_chat, headers=b, timeout=120)
    assert r.status_code == 404, r.text
    assert httpx.delete(f"{keyed.url}/v1/documents/{did}", headers=b).status_code == 404
    assert httpx.delete(f"{keyed.url}/v1/collections/{cid}", headers=b).status_code == 404
    found = httpx.post(f"{keyed.url}/v1/collections/{cid}/search", json=query, headers=a)
    assert found.status_code == 200 and found.json()["data"][0]["document_id"] == did


def _collection_with(keyed: KeyedServer, who: str, text: str) -> str:
    """A collection of `who` holding one ready document of `text`; its id."""
    auth = keyed.auth(who)
    cid = httpx.post(keyed.url + "/v1/collections", json={"name": "orchard"}, headers=auth).json()[
        "id"
    ]
    did = httpx.post(
        f"{keyed.url}/v1/collections/{cid}/documents",
        json={"filename": "memo.txt", "text": text},
        headers=auth,
    ).json()["id"]
    wait_ready(keyed, auth, did)
    return cid


def test_a_document_question_never_reuses_another_tenants_cached_prompt(keyed: KeyedServer):
    """Two tenants with the same document in their own collections build the very same prompt
    for the same question; the second is still computed from scratch (the salt is the tenant's)."""
    text = "Orchard ledger: the pears of the north field ripen late. " + SECRET
    ask = {"question": "When do the pears ripen?", "max_tokens": 1}

    def asked(who: str, cid: str) -> dict:
        r = httpx.post(
            f"{keyed.url}/v1/collections/{cid}/ask", json=ask, headers=keyed.auth(who), timeout=120
        )
        assert r.status_code == 200, r.text
        return r.json()["usage"]

    mine = _collection_with(keyed, "alice", text)
    theirs = _collection_with(keyed, "bob", text)
    first = asked("alice", mine)
    warm = asked("alice", mine)["prompt_tokens_details"]["cached_tokens"]
    assert warm > 60
    other = asked("bob", theirs)
    assert other["prompt_tokens"] == first["prompt_tokens"]  # the same tokens...
    # ...never served across tenants: bob gets at most the chat template's first few tokens,
    # which his own earlier chats in this module cached.
    assert other["prompt_tokens_details"]["cached_tokens"] < 8 < warm
