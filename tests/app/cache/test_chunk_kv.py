"""Chunk KV keys and entries: by content, per model and tenant, kept beside prefix entries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.cache.chunk_kv import ChunkKv, chunk_key
from app.cache.disk_cache import DiskCache
from app.cache.host_cache import HostCache
from mm.token_sequence import TokenSequence

ids = st.lists(st.integers(0, 50_000), max_size=20)
texts = st.text(max_size=12)


@given(fp=texts, salt=texts, head=ids, tokens=ids)
def test_the_key_is_a_sha256_of_its_fields(fp, salt, head, tokens):
    key = chunk_key(fp, salt, head, tokens)
    assert key == chunk_key(fp, salt, list(head), list(tokens))
    assert key.startswith("chunk:") and len(key) == len("chunk:") + 64


@given(a=st.tuples(texts, texts, ids, ids), b=st.tuples(texts, texts, ids, ids))
def test_different_fields_give_different_keys(a, b):
    if a != b:
        assert chunk_key(*a) != chunk_key(*b)


def test_where_the_head_ends_is_part_of_the_key():
    assert chunk_key("m", "s", [1, 2], [3]) != chunk_key("m", "s", [1], [2, 3])
    assert chunk_key("m", "ab", [], []) != chunk_key("ma", "b", [], [])


def test_an_entry_is_found_by_its_tenant_only_and_never_as_a_prefix(tmp_path):
    host = HostCache(1 << 20)
    disk = DiskCache(tmp_path, __file__)
    chunks = ChunkKv(host, disk, "model")
    blob = host.blob_of(b"state")
    chunks.put("tenant-a", [1, 2], [3, 4, 5], blob, "doc-1")
    assert chunks.get("tenant-a", [1, 2], [3, 4, 5]).tier == "host"
    assert chunks.get("tenant-b", [1, 2], [3, 4, 5]) is None
    assert chunks.get("tenant-a", [1], [3, 4, 5]) is None
    # A prompt of those very tokens under the tenant's salt finds no prefix entry.
    assert host.best("tenant-a", TokenSequence([1, 2, 3, 4, 5])) is None
    assert disk.best("tenant-a", TokenSequence([1, 2, 3, 4, 5])) is None
    host.forget_documents({"doc-1"})
    assert chunks.get("tenant-a", [1, 2], [3, 4, 5]).tier == "disk"  # the disk tier still has it
    host.forget_documents({"doc-1"})
    disk.forget_documents({"doc-1"})
    assert chunks.get("tenant-a", [1, 2], [3, 4, 5]) is None
    disk.flush()
