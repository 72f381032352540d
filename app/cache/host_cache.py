"""`HostCache`: saved KV states in host RAM, found by prefix through the radix `PrefixIndex`.

Before a slot's KV is discarded for another conversation, its state is copied here
(llama_state_seq_get_data_ext); a later request whose prompt shares a prefix with an entry gets
it restored into its slot and trimmed to the match. Loading an entry does not remove it (unlike
llama-server's), so the same prefix can serve many slots.

States live in pooled buffers (`StatePool`, app/cache/state_pool.py) that the cache owns: a
dropped entry's buffer takes the next save, so saves on the engine thread write into memory that
is already mapped. Sizes count the state's actual bytes (so the KV type in use, e.g. q8_0, is
what the budget sees).

Invariants: bytes_used == sum of entry sizes <= budget_bytes, tokens_used == sum of entry
lengths <= budget_tokens (when set); `index` holds exactly the entries, keyed by entry id; each
entry holds one reference to its blob, released when the entry is dropped.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from app.cache.prefix_index import PrefixIndex
from app.cache.state_pool import StateBlob, StatePool
from mm.token_sequence import TokenSequence


@dataclass(slots=True)
class HostEntry:
    id: int
    salt: str
    tokens: TokenSequence
    blob: StateBlob
    last_used: float = field(default_factory=time.monotonic)
    hits: int = 0
    priority: float = 0.0  # GDSF: clock at insertion/last hit + (hits + 1) * cost / size
    documents: frozenset[str] = frozenset()  # documents whose chunks the state holds
    # An entry of approximate (blended) KV: its first exact_n tokens are exact. None: all are.
    exact_n: int | None = None

    @property
    def n_bytes(self) -> int:
        return self.blob.n_bytes

    @property
    def data(self) -> memoryview:
        """The state bytes, no copy (valid while the entry is in the cache)."""
        return self.blob.view()


@dataclass(slots=True)
class HostCacheStats:
    entries: int
    bytes: int
    tokens: int
    budget_bytes: int
    budget_tokens: int | None
    # Measured over the entries: what one cached token costs with the KV type in use (-ctk/-ctv).
    bytes_per_token: float = 0.0


class HostCache:
    def __init__(
        self, budget_bytes: int, budget_tokens: int | None = None, policy: str = "lru"
    ) -> None:
        if policy not in ("lru", "gdsf"):
            raise ValueError(f"unknown eviction policy {policy!r}")
        # lru: least recently used first. gdsf (Greedy-Dual-Size-Frequency, the base of RAGCache's
        # PGDSF): lowest clock + frequency * cost / size first, where cost is the prefill the
        # entry saves (its tokens) and the clock rises to each evicted priority (aging).
        self.policy = policy
        self._clock = 0.0
        self.budget_bytes = budget_bytes
        self.budget_tokens = budget_tokens
        self.entries: dict[int, HostEntry] = {}
        self.index: PrefixIndex[int] = PrefixIndex()
        self.bytes_used = 0
        self.tokens_used = 0
        self._ids = itertools.count(1)
        self.pool = StatePool(min(budget_bytes, 256 << 20))

    def covers(self, salt: str, tokens: TokenSequence) -> bool:
        """True if some entry already holds all of `tokens` (saving them again is waste)."""
        found = self.index.best(salt, tokens)
        return found is not None and found[1] == len(tokens)

    def has_room(self, n_bytes: int, n_tokens: int) -> bool:
        """True if an entry this big fits beside every entry held now (evicting none)."""
        tokens_ok = self.budget_tokens is None or self.tokens_used + n_tokens <= self.budget_tokens
        return self.bytes_used + n_bytes <= self.budget_bytes and tokens_ok

    def fits(self, n_bytes: int, n_tokens: int) -> bool:
        return n_bytes <= self.budget_bytes and (
            self.budget_tokens is None or n_tokens <= self.budget_tokens
        )

    def blob_of(self, data: bytes | bytearray | memoryview) -> StateBlob:
        """A pooled copy of `data` (for states that arrive as bytes)."""
        blob = self.pool.take(len(data))
        blob.buf[: len(data)] = data
        blob.n_bytes = len(data)
        return blob

    def store(
        self,
        salt: str,
        tokens: TokenSequence,
        data: StateBlob | bytes,
        documents: frozenset[str] = frozenset(),
    ) -> HostEntry | None:
        """Add an entry, taking over the caller's reference to the blob; drops entries it wholly
        contains, then the lowest-priority ones, until the budgets hold. An entry larger than a
        budget is not stored (None, and the blob is released)."""
        blob = data if isinstance(data, StateBlob) else self.blob_of(data)
        if not self.fits(blob.n_bytes, len(tokens)):
            blob.release()
            return None
        for entry_id, n in self.index.match(salt, tokens).items():
            if n == len(self.entries[entry_id].tokens):  # wholly contained in the new entry
                self._drop(entry_id)
        while not self._room_for(blob.n_bytes, len(tokens)):
            self._evict()
        entry = HostEntry(next(self._ids), salt, tokens.copy(), blob, documents=documents)
        self._reprioritise(entry)
        self.entries[entry.id] = entry
        self.index.set(entry.id, salt, entry.tokens)
        self.bytes_used += entry.n_bytes
        self.tokens_used += len(entry.tokens)
        return entry

    def best(self, salt: str, prompt: TokenSequence) -> tuple[HostEntry, int] | None:
        found = self.index.best(salt, prompt)
        return (self.entries[found[0]], found[1]) if found else None

    def touch(self, entry: HostEntry) -> None:
        entry.hits += 1
        entry.last_used = time.monotonic()
        self._reprioritise(entry)

    def _reprioritise(self, entry: HostEntry) -> None:
        entry.priority = self._clock + (entry.hits + 1) * len(entry.tokens) / max(entry.n_bytes, 1)

    def _evict(self) -> None:
        if self.policy == "lru":
            victim = min(self.entries.values(), key=lambda e: e.last_used)
        else:
            victim = min(self.entries.values(), key=lambda e: e.priority)
            self._clock = victim.priority
        self._drop(victim.id)

    def forget_documents(self, documents: set[str]) -> int:
        """Drop every entry holding a chunk of these documents; returns how many."""
        gone = [i for i, e in self.entries.items() if e.documents & documents]
        for entry_id in gone:
            self._drop(entry_id)
        return len(gone)

    def clear(self) -> None:
        for entry_id in list(self.entries):
            self._drop(entry_id)

    def stats(self) -> HostCacheStats:
        return HostCacheStats(
            len(self.entries),
            self.bytes_used,
            self.tokens_used,
            self.budget_bytes,
            self.budget_tokens,
            self.bytes_used / self.tokens_used if self.tokens_used else 0.0,
        )

    def _room_for(self, n_bytes: int, n_tokens: int) -> bool:
        return self.bytes_used + n_bytes <= self.budget_bytes and (
            self.budget_tokens is None or self.tokens_used + n_tokens <= self.budget_tokens
        )

    def _drop(self, entry_id: int) -> None:
        entry = self.entries.pop(entry_id)
        self.index.remove(entry_id)
        self.bytes_used -= entry.n_bytes
        self.tokens_used -= len(entry.tokens)
        entry.blob.release()  # its buffer takes a later save (unless a disk write holds it)
