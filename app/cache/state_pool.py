"""`StatePool` and `StateBlob`: saved KV states in reused, already-mapped buffers.

Saving a slot's KV state runs on the engine thread, between decode steps, so every stream waits
for it. A save into fresh memory (a zero-filled ctypes array, then `bytes()`, then a slice) cost
several times the raw `llama_state_seq_get_data_ext` into a buffer that was used before, almost
all of it first-touch page faults (figures: docs/kv-reuse.md, Measurements). So states live in
`bytearray` buffers that go back to a pool when their entry is dropped, and the next save writes
into one of them: no zero-fill, no copy, no fresh pages once the tier is warm.

A blob is shared by the host tier (its entry) and the disk tier's writer (while it writes the
file): each holds a reference, and the buffer returns to the pool when the last one is released.
`retain`/`release` may be called from any thread; everything else runs on the engine thread.
"""

from __future__ import annotations

import threading

# Large buffers are allocated in whole MiB so that states of slightly different sizes share them.
GRANULE = 1 << 20


class StateBlob:
    """One saved state: `n_bytes` valid bytes at the start of a pooled buffer."""

    __slots__ = ("buf", "n_bytes", "_pool", "_refs")

    def __init__(self, pool: StatePool, buf: bytearray) -> None:
        self.buf = buf
        self.n_bytes = 0
        self._pool = pool
        self._refs = 1

    def view(self) -> memoryview:
        """The state bytes, without a copy (valid while a reference is held)."""
        return memoryview(self.buf)[: self.n_bytes]

    def retain(self) -> StateBlob:
        with self._pool.lock:
            if self._refs <= 0:
                raise RuntimeError("retain of a released state blob")
            self._refs += 1
        return self

    def release(self) -> None:
        with self._pool.lock:
            self._refs -= 1
            if self._refs > 0:
                return
            if self._refs < 0:
                raise RuntimeError("state blob released twice")
        self._pool.give(self.buf)


class StatePool:
    """Free buffers kept for the next saves, at most `max_free_bytes` of them."""

    def __init__(self, max_free_bytes: int = 256 << 20) -> None:
        self.max_free_bytes = max_free_bytes
        self.lock = threading.Lock()
        self._free: list[bytearray] = []
        self.free_bytes = 0
        self.allocated = 0  # buffers made fresh (each costs first-touch page faults once)
        self.reused = 0

    def take(self, n_bytes: int) -> StateBlob:
        """A blob whose buffer holds at least n_bytes: the smallest free buffer that fits and
        wastes at most half of itself, else a new one."""
        with self.lock:
            fits = [b for b in self._free if n_bytes <= len(b) <= 2 * max(n_bytes, GRANULE)]
            if fits:
                buf = min(fits, key=len)
                self._free.remove(buf)
                self.free_bytes -= len(buf)
                self.reused += 1
                return StateBlob(self, buf)
            self.allocated += 1
        size = n_bytes if n_bytes < GRANULE else -(-n_bytes // GRANULE) * GRANULE
        return StateBlob(self, bytearray(max(size, 1)))

    def give(self, buf: bytearray) -> None:
        """Keep a buffer for reuse; the largest go first when the pool is over its bound."""
        with self.lock:
            self._free.append(buf)
            self.free_bytes += len(buf)
            while self.free_bytes > self.max_free_bytes and self._free:
                dropped = self._free.pop(self._free.index(max(self._free, key=len)))
                self.free_bytes -= len(dropped)

    def clear(self) -> None:
        with self.lock:
            self._free.clear()
            self.free_bytes = 0
