"""`EncoderCache`: vision-encoder outputs (image embeddings) by (salt, image id), LRU under a
byte budget. An image whose KV was evicted still skips the encoder when it comes back."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class EncoderCacheStats:
    entries: int
    bytes: int
    budget_bytes: int
    hits: int
    misses: int
    encoded: int = 0  # encoder runs (filled in by `Vision.stats`; the cache does not run it)


class EncoderCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, str]) -> np.ndarray | None:
        found = self._items.get(key)
        if found is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return found

    def put(self, key: tuple[str, str], embeddings: np.ndarray) -> None:
        size = embeddings.nbytes
        if size > self.max_bytes:
            return  # larger than the whole budget (or the cache is off)
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= old.nbytes
        self._items[key] = embeddings
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, dropped = self._items.popitem(last=False)
            self.bytes -= dropped.nbytes

    def stats(self) -> EncoderCacheStats:
        return EncoderCacheStats(
            len(self._items), self.bytes, self.max_bytes, self.hits, self.misses
        )

    def __len__(self) -> int:
        return len(self._items)
