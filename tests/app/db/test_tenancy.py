"""Tenants in the Store: sessions by tenant, media rows of their tenant (rows from before they
had one: visible through uploads or messages), media reference-counted from messages, API keys
(on SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib

import pytest

from app.db.key_store import KeysState, KeyStore, LiveKeysError, key_hash
from app.db.media_rows import MediaNotVisible
from app.db.models import MediaAsset, MediaOwner, MessageMedia, legacy_media_id, utcnow
from app.db.store import Store


def media(store: Store, seed: bytes, tenant: str, owned: bool = False) -> str:
    sha = hashlib.sha256(seed).hexdigest()
    return store.add_media(sha, "image/png", 10, f"{sha[:2]}/{sha}.png", tenant, owned).id


def legacy_media(store: Store, seed: bytes, owner: str | None = None) -> str:
    """A row as uploads made it before media had a tenant: the sha256's id, shared."""
    sha = hashlib.sha256(seed).hexdigest()
    with store.transaction(write=True) as s:
        s.add(MediaAsset(id=legacy_media_id(sha), sha256=sha, mime_type="image/png", size=10,
                         location=f"{sha[:2]}/{sha}.png", created_at=utcnow()))  # fmt: skip
        s.flush()
        if owner is not None:
            s.add(MediaOwner(tenant_id=owner, media_id=legacy_media_id(sha), created_at=utcnow()))
    return legacy_media_id(sha)


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
    only = media(store, b"only", "alice")
    shared = media(store, b"shared", "alice")
    uploaded = media(store, b"uploaded", "alice", owned=True)
    s1 = store.create_session(tenant_id="alice")
    s2 = store.create_session(tenant_id="alice")
    store.add_message(s1.id, "user", image_message(only) + image_message(shared))
    store.add_message(s1.id, "user", image_message(uploaded))
    store.add_message(s2.id, "user", image_message(shared))
    assert store.get_media(only, tenant_id="alice") is not None
    assert store.get_media(only, tenant_id="bob") is None
    found, freed = store.delete_session_and_media(s1.id, "alice")
    assert found and [m.id for m in freed] == [only]
    assert store.get_media(only) is None
    assert store.get_media(shared) is not None  # s2 still uses it
    assert store.get_media(uploaded) is not None  # alice's upload keeps it
    assert store.release_media(uploaded, "bob") == (False, None)
    seen, gone = store.release_media(uploaded, "alice")
    assert seen and gone is not None and gone.id == uploaded


def test_the_same_bytes_are_a_row_of_each_tenant(store: Store):
    mine = media(store, b"same", "alice", owned=True)
    theirs = media(store, b"same", "bob", owned=True)
    assert mine != theirs
    a, b = store.get_media(mine, tenant_id="alice"), store.get_media(theirs, tenant_id="bob")
    assert a is not None and b is not None and a.sha256 == b.sha256
    assert store.get_media(mine, tenant_id="bob") is None
    assert store.get_media(theirs, tenant_id="alice") is None
    assert store.release_media(mine, "bob") == (False, None)
    seen, freed = store.release_media(mine, "alice")
    assert seen and freed is not None and freed.id == mine
    assert store.get_media(theirs, tenant_id="bob") is not None  # bob's own is untouched


def test_a_message_never_links_another_tenants_media(store: Store):
    """Not by import (refused, nothing stored), not by a message, not by a fork of a session
    whose history names it: the media stays invisible to the other tenant."""
    alices = media(store, b"secret", "alice", owned=True)
    old = legacy_media(store, b"old secret", owner="alice")
    for mid in (alices, old):
        imported = [("user", "hi"), ("user", image_message(mid))]
        before = len(store.list_sessions(tenant_id="bob"))
        with pytest.raises(MediaNotVisible) as refused:
            store.create_session(messages=imported, tenant_id="bob")
        assert (refused.value.index, refused.value.media_id) == (1, mid)
        assert len(store.list_sessions(tenant_id="bob")) == before  # nothing stored
        bobs = store.create_session(tenant_id="bob")
        store.add_message(bobs.id, "user", image_message(mid))  # stored, but not linked
        fork = store.fork_session(bobs.id, 1)
        assert fork is not None and len(fork.messages) == 1
        assert store.get_media(mid, tenant_id="bob") is None
        assert store.release_media(mid, "bob") == (False, None)
    own = store.create_session(messages=[("user", image_message(old))], tenant_id="alice")
    assert store.get_media(old, tenant_id="alice") is not None and own.n_messages == 1


def test_a_row_from_before_tenants_is_seen_by_its_uploader_and_its_messages_tenant(store: Store):
    old = legacy_media(store, b"before", owner="alice")
    assert store.get_media(old, tenant_id="alice") is not None
    assert store.get_media(old, tenant_id="bob") is None
    used = legacy_media(store, b"used")
    s = store.create_session(tenant_id="carol")
    with store.transaction(write=True) as tx:  # a message stored before uploads were checked
        tx.add(MessageMedia(message_id=store.add_message(s.id, "user", "x").id, media_id=used))
    assert store.get_media(used, tenant_id="carol") is not None
    assert store.get_media(used, tenant_id="bob") is None


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
