"""Tenants in the Store: sessions by tenant, media visible through uploads or messages, and
media reference-counted from messages (on SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib

import pytest

from app.db.key_store import KeysState, KeyStore, LiveKeysError, key_hash
from app.db.store import Store


def media(store: Store, seed: bytes, owner: str | None = None) -> str:
    sha = hashlib.sha256(seed).hexdigest()
    return store.add_media(sha, "image/png", 10, f"{sha[:2]}/{sha}.png", owner).id


def image_message(media_id: str) -> list[dict]:
    return [{"type": "image_file", "image_file": {"file_id": media_id}}]


def test_sessions_belong_to_their_tenant(store: Store):
    a = store.create_session(title="a", tenant_id="alice")
    store.create_session(title="b", tenant_id="bob")
    assert [s.id for s in store.list_sessions(tenant_id="alice")] == [a.id]
    assert store.get_session(a.id, tenant_id="bob") is None
    assert store.get_session(a.id, tenant_id="alice") is not None
    assert store.delete_session(a.id, tenant_id="bob") is False
    assert store.delete_session(a.id, tenant_id="alice") is True


def test_deleting_a_session_frees_the_media_only_it_used(store: Store):
    only = media(store, b"only")
    shared = media(store, b"shared")
    uploaded = media(store, b"uploaded", owner="alice")
    s1 = store.create_session(tenant_id="alice")
    s2 = store.create_session(tenant_id="alice")
    store.add_message(s1.id, "user", image_message(only) + image_message(shared))
    store.add_message(s1.id, "user", image_message(uploaded))
    store.add_message(s2.id, "user", image_message(shared))
    assert store.get_media(only, tenant_id="alice") is not None  # seen through a message
    assert store.get_media(only, tenant_id="bob") is None
    found, freed = store.delete_session_and_media(s1.id, "alice")
    assert found and [m.id for m in freed] == [only]
    assert store.get_media(only) is None
    assert store.get_media(shared) is not None  # s2 still uses it
    assert store.get_media(uploaded) is not None  # alice's upload keeps it
    assert store.release_media(uploaded, "bob") == (False, None)
    seen, gone = store.release_media(uploaded, "alice")
    assert seen and gone is not None and gone.id == uploaded


def test_keys_are_stored_as_hashes_and_revoked(store: Store):
    keys = KeyStore(store)
    record, key = keys.create("alice")
    assert record.tenant_id == "alice" and not record.admin
    assert keys.lookup(key) == record
    assert keys.lookup(key + "x") is None
    assert key_hash(key) != key and keys.any_live()
    assert [k.id for k in keys.revoke("alice")] == [record.id]
    assert keys.lookup(key) is None and not keys.any_live()


def test_keys_fail_closed_until_the_server_is_opened(store: Store):
    keys = KeyStore(store)
    assert keys.state() == KeysState(keyed=False, live=False)
    record, _ = keys.create("alice")
    assert keys.state() == KeysState(keyed=True, live=True)
    with pytest.raises(LiveKeysError, match="revoke them first"):
        keys.open_server()
    keys.revoke("alice")
    assert keys.state() == KeysState(keyed=True, live=False)  # revoking never opens
    assert [k.id for k in keys.open_server()] == [record.id]
    assert keys.state() == KeysState(keyed=False, live=False) and keys.list() == []
