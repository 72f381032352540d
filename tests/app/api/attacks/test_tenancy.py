"""Attacks of one tenant on another's media, through a real keyed server with a projector: an
image is its tenant's wherever a message can name it (chat, session import, a stored session's
next turn, fork, Responses input, Anthropic blocks), and a media id or a duplicate upload tells
no tenant that another uploaded the same bytes."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from PIL import Image
from sqlalchemy import update

from app.db.models import MediaAsset
from app.db.store import Store
from bench.lib.server_process import ROOT, ServerProcess, make_key
from tests.app.api.keyed_server import KeyedServer

NO_MEDIA = "no uploaded media"
LONG_AGO = datetime(2001, 1, 1, tzinfo=UTC)
ONE = {"max_tokens": 1}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    """Tenants alice and bob on a server with the tiny test projector."""
    data = tmp_path_factory.mktemp("tenancy")
    mmproj = data / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(mmproj)], check=True, capture_output=True)
    keys = {name: make_key(data, name) for name in ("alice", "bob")}
    args = ("-np", "2", "-c", "2048", "--data-dir", str(data), "--mmproj", str(mmproj))
    with ServerProcess(*args, "--doc-prefill-tokens", "0") as srv:
        yield KeyedServer(srv, data, keys)


def picture(seed: int) -> bytes:
    im = Image.new("RGB", (64, 64))
    im.putdata([((x * 7 + seed) % 256, (x * 3) % 256, seed % 256) for x in range(64 * 64)])
    out = io.BytesIO()
    im.save(out, "PNG")
    return out.getvalue()


def upload(keyed: KeyedServer, who: str, data: bytes) -> dict:
    headers = {**keyed.auth(who), "Content-Type": "image/png"}
    r = httpx.post(keyed.url + "/v1/media", content=data, headers=headers, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def image_file(media_id: str) -> dict:
    return {"type": "image_file", "image_file": {"file_id": media_id}}


def asking(media_id: str) -> list[dict]:
    return [image_file(media_id), {"type": "text", "text": "What is in the picture?"}]


def post(keyed: KeyedServer, who: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(keyed.url + path, json=body, headers=keyed.auth(who), timeout=120)


def assert_unknown_media(r: httpx.Response, param: str | None) -> None:
    """Another tenant's id reads as an unknown one: 400, plain words, the field named."""
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert NO_MEDIA in error["message"], error
    if param is not None:
        assert error["param"] == param, error


def open_store(keyed: KeyedServer) -> Store:
    return Store(f"sqlite:///{keyed.data_dir / 'kvchat.db'}")


@pytest.fixture(scope="module")
def alices(keyed: KeyedServer) -> str:
    """Alice's private picture."""
    return upload(keyed, "alice", picture(7))["id"]


def test_an_imported_session_cannot_name_another_tenants_image(keyed: KeyedServer, alices: str):
    before = httpx.get(keyed.url + "/v1/sessions", headers=keyed.auth("bob")).json()["data"]
    body = {
        "title": "mine",
        "messages": [
            {"role": "user", "content": "Hello."},
            {"role": "user", "content": asking(alices)},
            {"role": "assistant", "content": "A picture."},
        ],
    }
    r = post(keyed, "bob", "/v1/sessions", body)
    if r.status_code == 201:  # the attack as found: the next turn sees alice's image
        more = turn(keyed, "bob", r.json()["id"], "More?")
        pytest.fail(f"import stored another tenant's image; its next turn: {more.text}")
    assert_unknown_media(r, "messages.1.content")
    after = httpx.get(keyed.url + "/v1/sessions", headers=keyed.auth("bob")).json()["data"]
    assert after == before  # nothing stored
    mine = post(keyed, "alice", "/v1/sessions", body)  # her own image: imported
    assert mine.status_code == 201, mine.text


def bobs_session_naming(keyed: KeyedServer, media_id: str) -> str:
    """A session of bob's whose history names `media_id`, as an import stored it before imports
    were checked (written to the server's database: no route stores one any more)."""
    store = open_store(keyed)
    try:
        s = store.create_session(title="old import", tenant_id="bob")
        for role, content in [
            ("user", asking(media_id)),
            ("assistant", "A picture."),
            ("user", "Thanks."),
            ("assistant", "You are welcome."),
        ]:
            store.add_message(s.id, role, content)
        return s.id
    finally:
        store.close()


def turn(keyed: KeyedServer, who: str, sid: str, content: str | list[dict]) -> httpx.Response:
    return post(keyed, who, f"/v1/sessions/{sid}/messages", {"content": content, **ONE})


def test_a_stored_history_naming_another_tenants_image_never_loads_it(
    keyed: KeyedServer, alices: str
):
    sid = bobs_session_naming(keyed, alices)
    assert_unknown_media(turn(keyed, "bob", sid, "More?"), None)
    session = httpx.get(f"{keyed.url}/v1/sessions/{sid}", headers=keyed.auth("bob")).json()
    assert session["n_messages"] == 4  # the refused turn stored nothing
    at = {"message_id": session["messages"][2]["id"]}  # the branch keeps the image's turn
    fork = post(keyed, "bob", f"/v1/sessions/{sid}/fork", at)
    assert fork.status_code == 201, fork.text
    # The branch copies the history but gains no hold on the image: still unknown to bob.
    for path in (f"/v1/media/{alices}", f"/v1/media/{alices}/content"):
        assert httpx.get(keyed.url + path, headers=keyed.auth("bob")).status_code == 404
    assert_unknown_media(turn(keyed, "bob", fork.json()["id"], "And?"), None)
    assert httpx.get(f"{keyed.url}/v1/media/{alices}", headers=keyed.auth("alice")).is_success


def test_every_message_route_refuses_another_tenants_image(keyed: KeyedServer, alices: str):
    chat = {"messages": [{"role": "user", "content": asking(alices)}], "max_tokens": 1}
    assert_unknown_media(post(keyed, "bob", "/v1/chat/completions", chat), "messages.0.content")
    sid = post(keyed, "bob", "/v1/sessions", {"title": "turns"}).json()["id"]
    assert_unknown_media(turn(keyed, "bob", sid, asking(alices)), "content")
    responses = {
        "model": "m",
        "max_output_tokens": 1,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_image", "file_id": alices}],
            }
        ],
    }
    assert_unknown_media(post(keyed, "bob", "/v1/responses", responses), None)
    anthropic = {
        "model": "m",
        "max_tokens": 1,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "file", "file_id": alices}},
                    {"type": "text", "text": "What is in the picture?"},
                ],
            }
        ],
    }
    refused = post(keyed, "bob", "/v1/messages", anthropic)
    assert refused.status_code == 400 and NO_MEDIA in refused.json()["error"]["message"]
    # Each route takes the tenant's own upload: the image reaches the prompt.
    assert post(keyed, "alice", "/v1/chat/completions", chat).json()["usage"]["prompt_tokens"] > 64
    assert post(keyed, "alice", "/v1/responses", responses).status_code == 200
    own = post(keyed, "alice", "/v1/messages", anthropic)
    assert own.status_code == 200, own.text
    usage = own.json()["usage"]
    assert usage["input_tokens"] + usage.get("cache_read_input_tokens", 0) > 64


def test_a_media_id_or_a_duplicate_upload_reveals_no_other_tenants_upload(keyed: KeyedServer):
    data = picture(11)
    first = upload(keyed, "alice", data)
    store = open_store(keyed)  # her upload is old: a duplicate must not say so
    try:
        with store.transaction(write=True) as s:
            s.execute(
                update(MediaAsset).where(MediaAsset.id == first["id"]).values(created_at=LONG_AGO)
            )
    finally:
        store.close()
    theirs = upload(keyed, "bob", data)
    assert theirs["sha256"] == first["sha256"]  # the same bytes...
    assert theirs["id"] != first["id"]  # ...another id: bob cannot learn alice's from his
    assert theirs["created_at"] > LONG_AGO.timestamp()  # his own upload's time, not hers
    again = upload(keyed, "bob", data)
    assert again == theirs  # idempotent within a tenant
    bob_delete = httpx.delete(f"{keyed.url}/v1/media/{theirs['id']}", headers=keyed.auth("bob"))
    assert bob_delete.status_code == 200
    mine = httpx.get(f"{keyed.url}/v1/media/{first['id']}", headers=keyed.auth("alice"))
    assert mine.status_code == 200 and mine.json()["created_at"] == int(LONG_AGO.timestamp())
    for path in (f"/v1/media/{first['id']}", f"/v1/media/{first['id']}/content"):
        assert httpx.get(keyed.url + path, headers=keyed.auth("bob")).status_code == 404


def test_the_same_image_of_two_tenants_is_computed_for_each(keyed: KeyedServer):
    """The cache keys stay the image's content hash under the tenant's salt: bob's copy of
    alice's picture reuses nothing of hers (the time to first token tells nothing)."""
    data = picture(23)
    ids = {who: upload(keyed, who, data)["id"] for who in ("alice", "bob")}

    def ask(who: str) -> dict:
        chat = {"messages": [{"role": "user", "content": asking(ids[who])}], "max_tokens": 1}
        r = post(keyed, who, "/v1/chat/completions", chat)
        assert r.status_code == 200, r.text
        return r.json()["usage"]

    ask("alice")
    warm = ask("alice")["prompt_tokens_details"]["cached_tokens"]
    assert warm > 64  # her image is cached for her
    assert ask("bob")["prompt_tokens_details"]["cached_tokens"] < 64  # never across tenants
