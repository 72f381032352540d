"""`KvTiers`: a slot's KV to and from the host-memory and disk tiers.

Finds the longest prefix of a task's prompt each tier holds, saves a slot's KV into them (only
when the slot would lose enough of it), restores a stored state into a slot, and reads disk
files ahead of admission. `PrefixReuse` decides which source serves a prompt and when a slot is
saved; this is how the KV moves. Engine thread only.

Everything here runs between decode steps, so every stream waits for it: a save writes the state
straight into a pooled buffer of the host tier, a restore reads straight from the stored buffer,
and hashing and file I/O of the disk tier run on its own threads. A queued request whose best
prefix is on disk gets it read on the reader thread while it waits (`prefetch`), so its
admission restores from memory. `on_op(op, tier, seconds)` reports each tier operation's
engine-thread time (the /metrics histogram).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future

from app.cache.disk_cache import DiskCache, DiskEntry
from app.cache.host_cache import HostCache, HostEntry
from app.engine.core.slot import Slot, usable_prefix
from app.engine.llama.model import Model
from app.engine.reuse_kinds import CacheSource
from app.engine.task import Task

# A slot about to lose fewer tokens than this is not saved: recomputing them costs little more
# than restoring them, so smaller losses are not worth a host-cache entry (figures:
# docs/kv-reuse.md, Measurements).
MIN_SAVE_TOKENS = 16
# Saving copies the whole sequence's KV (time grows with its length) on the path to
# the next request's first token. A slot that keeps most of its KV serves the same conversation
# (a retry, a regenerated reply): what it drops is rarely asked for again, so it is saved only
# when it loses at least this share of its tokens.
MIN_SAVE_SHARE = 0.25
# Host entries of blended (approximate) KV live under their own salt: a prefix request looks up
# its tenant's salt only and never meets them; a blend request looks up both.
BLENDED = "blended:"


def blended_salt(salt: str) -> str:
    return BLENDED + salt


class KvTiers:
    def __init__(
        self,
        model: Model,
        host: HostCache,
        disk: DiskCache | None,
        forgotten: set[str],
        wake: Callable[[], None] = lambda: None,
        on_op: Callable[[str, str, float], None] | None = None,
    ) -> None:
        self.model = model
        self.host = host
        self.disk = disk
        # Deleted documents (PrefixReuse's set): KV holding their chunks is never saved.
        self.forgotten = forgotten
        self.wake = wake  # wakes the engine loop (a prefetch finished)
        self.on_op = on_op  # (op, tier, seconds) of each tier operation

    def host_best(self, task: Task) -> tuple[HostEntry | None, int]:
        """Host memory's longest usable prefix of the task's prompt (entry, length); a blend
        request may take a blended entry."""
        prompt, salt = task.request.prompt, task.request.cache_salt
        found = self.host.best(salt, prompt)
        if task.request.approximate:
            blended = self.host.best(blended_salt(salt), prompt)
            if blended is not None and (found is None or blended[1] > found[1]):
                found = blended
        if found is None:
            return None, 0
        return found[0], usable_prefix(prompt, found[1])

    def disk_best(self, task: Task) -> tuple[DiskEntry, int] | None:
        if self.disk is None:
            return None
        return self.disk.best(task.request.cache_salt, task.request.prompt)

    def save(self, slot: Slot, keep: int) -> int:
        """Copy the slot's KV to host memory if keeping only `keep` tokens would lose enough;
        returns how many entries it stored (a blended slot's approximate part counts apart)."""
        saved = 0
        if slot.blended_from is not None:  # the tiers hold exact KV under the tenant's salt
            if keep > slot.blended_from:
                return 0  # what is dropped is approximate; what is kept stays in the slot
            saved = self._save_blended(slot)
            slot.cut_to(slot.blended_from, self.model)
        tokens = slot.cache
        lost = len(tokens) - keep
        if lost < MIN_SAVE_TOKENS or (keep > 0 and lost < MIN_SAVE_SHARE * len(tokens)):
            return saved
        if not self.unsaved(slot):
            return saved
        t0 = time.perf_counter()
        size = self.model.state_size(slot.id)
        to_host = self.host.fits(size, len(tokens))
        if not to_host and self.disk is None:
            return saved
        blob = self.model.state_blob(slot.id, self.host.pool, size)
        if self.disk is not None:  # the writer holds its own reference
            self.disk.store(slot.salt, tokens, blob, slot.documents)
        if to_host:
            self.host.store(slot.salt, tokens, blob, slot.documents)  # takes over ours
        else:
            blob.release()
        self._timed("save", CacheSource.HOST if to_host else CacheSource.DISK, t0)
        return saved + 1

    def unsaved(self, slot: Slot) -> bool:
        """The slot's KV may go to the tiers (it holds no deleted document's chunks) and host
        memory does not hold all of it yet."""
        return not slot.documents & self.forgotten and not self.host.covers(slot.salt, slot.cache)

    def _save_blended(self, slot: Slot) -> int:
        """The whole of a slot's blended KV into host memory, under the blended salt, where
        only blend requests look (never to disk: the disk tier, shared by replicas, holds
        exact KV only); the exact part is saved apart, by `save`. Returns 1 if it stored it."""
        salt, tokens = blended_salt(slot.salt), slot.cache
        if len(tokens) - (slot.blended_from or 0) < MIN_SAVE_TOKENS:
            return 0
        if slot.documents & self.forgotten or self.host.covers(salt, tokens):
            return 0
        t0 = time.perf_counter()
        size = self.model.state_size(slot.id)
        if not self.host.has_room(size, len(tokens)):
            return 0  # approximate KV never evicts an entry
        blob = self.model.state_blob(slot.id, self.host.pool, size)
        entry = self.host.store(salt, tokens, blob, slot.documents)  # takes over our reference
        if entry is not None:
            entry.exact_n = slot.blended_from
        self._timed("save", CacheSource.HOST, t0)
        return 1

    def restore(self, slot: Slot, data, tokens, salt: str, tier: CacheSource) -> bool:
        """The stored state into the slot's KV; False (the slot left empty) when the KV has no
        room for it right now."""
        t0 = time.perf_counter()
        slot.erase(self.model)
        if not self.model.state_restore(slot.id, data):  # no room in the KV right now
            slot.erase(self.model)
            return False
        slot.cache = tokens.copy()
        slot.salt = salt
        self._timed("restore", tier, t0)
        return True

    def prefetch(self, task: Task) -> None:
        """A queued task whose best prefix is only on disk: read it on the reader thread now,
        so that admitting the task restores from memory (the engine thread never waits on the
        file). The task is not admitted before the read ends (`Task.waiting_for`)."""
        if self.disk is None or not task.cache_prompt:
            return
        # Shared: first what the other replicas wrote since the last look (the reader thread
        # runs in order: a read queued below starts after it). What it finds is indexed when
        # the task is admitted and, if better than what is known now, read then.
        refresh = self.disk.refresh_async() if self.disk.shared else None
        future = self._prefetch_known(task)
        if future is None:
            future = refresh
        if future is not None:
            task.waiting_for = future
            future.add_done_callback(lambda _: self.wake())

    def _prefetch_known(self, task: Task) -> Future | None:
        on_disk = self.disk_best(task)
        if on_disk is None:
            return None
        prompt, salt = task.request.prompt, task.request.cache_salt
        found = self.host.best(salt, prompt)
        if found is not None and found[1] >= on_disk[1]:
            return None
        future = self.disk.read_async(on_disk[0])
        task.prefetched = (on_disk[0], future)
        return future

    def read(self, task: Task, entry: DiskEntry) -> bytes | None:
        """The entry's bytes: prefetched if it was, else read here (engine thread)."""
        prefetched, task.prefetched = task.prefetched, None
        if prefetched is not None and prefetched[0] is entry:
            return self.disk.finish_read(entry, prefetched[1].result())
        return self.disk.read(entry)

    def _timed(self, op: str, tier: CacheSource, t0: float) -> None:
        if self.on_op is not None:
            self.on_op(op, tier, time.perf_counter() - t0)
