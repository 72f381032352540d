"""`ChunkKv`: each document chunk's own KV (computed after the collection's head), by content.

Entries live in the host tier and, with --cache-dir, the disk tier, beside the prefix entries,
under budgets and eviction of those tiers: an entry's salt is `chunk:` + the sha256 of (model
fingerprint, tenant salt, head tokens, chunk tokens), and its tokens are head + chunk, exactly
what its state holds (positions 0..len-1). A prefix lookup goes by a tenant's salt, so it never
meets a chunk entry; a chunk entry is found only by its whole key, which holds the tenant's salt:
one tenant's chunk KV is never served to another. Each entry carries its document's id, so
deleting the document drops it from both tiers (their `forget_documents`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from app.cache import state_file
from app.cache.disk_cache import DiskCache, DiskEntry
from app.cache.host_cache import HostCache, HostEntry
from app.cache.state_pool import StateBlob
from mm.token_sequence import TokenSequence

PREFIX = "chunk:"


def chunk_key(fingerprint: str, salt: str, head: Sequence[int], tokens: Sequence[int]) -> str:
    """The entry's salt: a sha256 over every field, each length-prefixed (no two field lists
    give the same bytes)."""
    h = hashlib.sha256()
    for text in (fingerprint, salt):
        raw = text.encode("utf-8")
        h.update(struct.pack("<Q", len(raw)) + raw)
    for seq in (head, tokens):
        h.update(struct.pack("<Q", len(seq)))
        h.update(struct.pack(f"<{len(seq)}i", *seq))
    return PREFIX + h.hexdigest()


def model_fingerprint(path: str) -> str:
    """The model file's fingerprint (the disk tier's); its path when it cannot be read."""
    try:
        return state_file.cached_fingerprint(path)
    except OSError:
        return path


@dataclass(slots=True)
class ChunkState:
    data: memoryview | bytes  # the state: head + chunk cells
    n_head: int
    tier: str  # host | disk


class ChunkKv:
    def __init__(self, host: HostCache, disk: DiskCache | None, fingerprint: str) -> None:
        self.host = host
        self.disk = disk
        self.fingerprint = fingerprint

    def key(self, salt: str, head: Sequence[int], tokens: Sequence[int]) -> str:
        return chunk_key(self.fingerprint, salt, head, tokens)

    def _whole(
        self, salt: str, head: Sequence[int], tokens: Sequence[int]
    ) -> tuple[str, TokenSequence]:
        """The entry's key and its tokens (head + chunk)."""
        return self.key(salt, head, tokens), TokenSequence([*head, *tokens])

    @staticmethod
    def _entry(
        tier: HostCache | DiskCache | None, key: str, whole: TokenSequence
    ) -> HostEntry | DiskEntry | None:
        """The tier's entry holding exactly head + chunk, or None."""
        found = tier.best(key, whole) if tier is not None else None
        return found[0] if found is not None and found[1] == len(whole) else None

    def has(self, salt: str, head: Sequence[int], tokens: Sequence[int]) -> bool:
        """Whether the host or the disk tier holds the chunk's state (nothing is read)."""
        key, whole = self._whole(salt, head, tokens)
        return any(self._entry(t, key, whole) is not None for t in (self.host, self.disk))

    def get(self, salt: str, head: Sequence[int], tokens: Sequence[int]) -> ChunkState | None:
        """The chunk's state from the host tier, else from disk (read on this thread, then kept
        in host memory again); None when neither holds it."""
        key, whole = self._whole(salt, head, tokens)
        in_host = self._entry(self.host, key, whole)
        if in_host is not None:
            self.host.touch(in_host)
            return ChunkState(in_host.data, len(head), "host")
        on_disk = self._entry(self.disk, key, whole)
        data = self.disk.read(on_disk) if on_disk is not None else None
        if data is None:
            return None
        self.host.store(key, whole, data, on_disk.documents)
        return ChunkState(data, len(head), "disk")

    def put(
        self,
        salt: str,
        head: Sequence[int],
        tokens: Sequence[int],
        blob: StateBlob,
        document_id: str,
    ) -> None:
        """Keep a state of head + chunk (taking over the caller's reference to `blob`)."""
        key, whole = self._whole(salt, head, tokens)
        documents = frozenset({document_id})
        if self.disk is not None:  # the writer holds its own reference
            self.disk.store(key, whole, blob, documents)
        self.host.store(key, whole, blob, documents)
