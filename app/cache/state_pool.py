"""`StatePool` and `StateBlob`: saved KV states in reused, already-mapped buffers.

Saving a slot's KV state runs on the engine thread, between decode steps, so every stream waits
for it. A save into fresh memory (a zero-filled ctypes array, then `bytes()`, then a slice) cost
several times the raw `llama_state_seq_get_data_ext` into a buffer that was used before, almost
all of it first-touch page faults (figures: docs/kv-reuse.md, Measurements). So states live in
buffers that go back to a pool when their entry is dropped, and the next save writes into one of
them: no zero-fill, no copy, no fresh pages once the tier is warm. While the tier fills, the
engine makes the buffers of the saves it expects next ready when it is idle (`warm`), a piece at
a time, so that a save on a request's path finds its pages mapped.

A blob is shared by the host tier (its entry) and the disk tier's writer (while it writes the
file): each holds a reference, and the buffer returns to the pool when the last one is released.
`retain`/`release` may be called from any thread; everything else runs on the engine thread.
"""

from __future__ import annotations

import ctypes
import mmap
import threading

# Large buffers are allocated in whole MiB so that states of slightly different sizes share them.
GRANULE = 1 << 20
# First-touch work of one `warm` call: ~3 ms here, the most a request arriving meanwhile waits.
WARM_PIECE = 4 << 20


def new_buffer(n_bytes: int) -> mmap.mmap:
    """Private anonymous memory, its pages mapped at first touch (no zero-fill pass)."""
    return mmap.mmap(-1, max(n_bytes, 1), flags=mmap.MAP_PRIVATE)


def rounded(n_bytes: int) -> int:
    return n_bytes if n_bytes < GRANULE else -(-n_bytes // GRANULE) * GRANULE


def fits(n_bytes: int, buf: mmap.mmap) -> bool:
    """A buffer serves a state that fills at least half of it."""
    return n_bytes <= len(buf) <= 2 * max(n_bytes, GRANULE)


def smallest_fit(n_bytes: int, buffers: list[mmap.mmap]) -> mmap.mmap | None:
    return min((b for b in buffers if fits(n_bytes, b)), key=len, default=None)


class StateBlob:
    """One saved state: `n_bytes` valid bytes at the start of a pooled buffer."""

    __slots__ = ("buf", "n_bytes", "_pool", "_refs")

    def __init__(self, pool: StatePool, buf: mmap.mmap) -> None:
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
        self._free: list[mmap.mmap] = []
        self.free_bytes = 0
        self.allocated = 0  # buffers made fresh (each costs first-touch page faults once)
        self.reused = 0
        self.warmed = 0  # buffers made ready by `warm`
        # Being touched by `warm` (engine thread); a save that needs a buffer takes it as it is.
        self._warming: mmap.mmap | None = None
        self._touched = 0  # its bytes touched so far

    def take(self, n_bytes: int) -> StateBlob:
        """A blob whose buffer holds at least n_bytes: the smallest free buffer that fits and
        wastes at most half of itself, else a new one."""
        with self.lock:
            buf = smallest_fit(n_bytes, self._free)
            if buf is not None:
                self._free.remove(buf)
                self.free_bytes -= len(buf)
                self.reused += 1
                return StateBlob(self, buf)
            if self._warming is not None and fits(n_bytes, self._warming):
                buf, self._warming = self._warming, None  # its touched part is ready
                self.reused += 1
                return StateBlob(self, buf)
            self.allocated += 1
        return StateBlob(self, new_buffer(rounded(n_bytes)))

    def warm(self, sizes: list[int]) -> bool:
        """One piece (WARM_PIECE bytes) of first-touch work toward a free buffer for each of
        `sizes`, the saves expected next; False, doing nothing, when each has one or the bound
        on free bytes leaves no room for another. Engine thread, while it has nothing else to
        do: the pages are mapped there and then, not in a save on a request's path."""
        if self._warming is None:
            with self.lock:
                missing = self._missing(sizes)
                size = rounded(missing[0]) if missing else 0
                if not missing or self.free_bytes + size > self.max_free_bytes:
                    return False
            self._warming, self._touched = new_buffer(size), 0
        buf = self._warming
        n = min(WARM_PIECE, len(buf) - self._touched)
        address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        ctypes.memset(address + self._touched, 0, n)  # outside the GIL
        self._touched += n
        if self._touched == len(buf):
            self._warming = None
            self.warmed += 1
            self.give(buf)
        return True

    def _missing(self, sizes: list[int]) -> list[int]:
        """Of `sizes`, largest first, those left without a free buffer, each buffer serving one."""
        free, missing = list(self._free), []
        for n in sorted(sizes, reverse=True):
            buf = smallest_fit(n, free)
            if buf is not None:
                free.remove(buf)
            else:
                missing.append(n)
        return missing

    def give(self, buf: mmap.mmap) -> None:
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
