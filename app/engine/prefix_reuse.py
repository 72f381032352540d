"""`PrefixReuse`: puts the longest reusable prefix of a prompt into a slot's KV.

Sources, cheapest first: the slot's own KV (nothing to do), another slot's KV (shared cells via
llama_memory_seq_cp, also while that slot generates), a host-memory copy (restored and trimmed),
a file of the disk tier (read, checked, restored, and kept in host memory again).
Before a slot loses a meaningful part of its KV, that KV is saved to host memory, so a
conversation whose slot was taken gets its prefix back on whichever slot it lands.
Engine thread only.

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
from dataclasses import dataclass, field

from app.cache.disk_cache import DiskCache, DiskEntry
from app.cache.host_cache import HostCache, HostCacheStats, HostEntry
from app.engine.model import Model
from app.engine.scheduler import Scheduler
from app.engine.slot import Slot, usable_prefix
from app.engine.task import Task
from mm.token_sequence import TokenSequence

# A slot about to lose fewer tokens than this is not saved: recomputing them costs little more
# than restoring them, so smaller losses are not worth a host-cache entry (figures:
# docs/kv-reuse.md, Measurements).
MIN_SAVE_TOKENS = 16
# Saving copies the whole sequence's KV (time grows with its length) on the path to
# the next request's first token. A slot that keeps most of its KV serves the same conversation
# (a retry, a regenerated reply): what it drops is rarely asked for again, so it is saved only
# when it loses at least this share of its tokens.
MIN_SAVE_SHARE = 0.25
TIERS = ("own_slot", "other_slot", "host", "disk")
# Host entries of blended (approximate) KV live under their own salt: a prefix request looks up
# its tenant's salt only and never meets them; a blend request looks up both.
BLENDED = "blended:"


def blended_salt(salt: str) -> str:
    return BLENDED + salt


# Fewest tokens a task must prefill for the idle slots it parks to get their pending tails
# (a conversation's next-turn boundary, a few tokens) decoded first, so they are saved with
# them: a tail costs a small share of such a prefill (docs/kv-reuse.md, Measurements). The next
# turn of that conversation then prefills that much less.
TAIL_BEFORE_PARK_MIN = 256


@dataclass(slots=True)
class ReuseStats:
    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    saves: int = 0
    host: HostCacheStats | None = None
    disk_entries: int = 0
    disk_bytes: int = 0  # files of the disk tier, counted against --cache-disk


class PrefixReuse:
    def __init__(
        self,
        model: Model,
        scheduler: Scheduler,
        host: HostCache,
        disk: DiskCache | None = None,
        shift_min_chunk: int = 0,
        wake: Callable[[], None] = lambda: None,
        on_op: Callable[[str, str, float], None] | None = None,
        prefill_tail: Callable[[Slot], None] | None = None,
    ) -> None:
        self.model = model
        self.wake = wake  # wakes the engine loop (a prefetch finished)
        self.on_op = on_op  # (op, tier, seconds) of each tier operation
        # Decodes an idle slot's pending tail into its KV (the engine's: `Slot.prefill_tail`
        # with the step batch); None: tails are dropped when their slot is parked.
        self.prefill_tail = prefill_tail
        self.shift_min_chunk = shift_min_chunk  # --cache-reuse; 0 = no KV shifting
        self.scheduler = scheduler
        self.host = host
        self.disk = disk
        self.stats = ReuseStats()
        # Deleted documents: a busy slot may still hold their chunks; it is never a source
        # again and is erased before its next use (idle ones are erased at once).
        self.forgotten: set[str] = set()

    def prepare(self, task: Task, slot: Slot, park: bool = False) -> tuple[int, str]:
        """Fill the slot's KV with the best prefix; returns (cached tokens, source). `park`:
        first free the other idle slots' cells (`park_idle`): before a long prefill all of
        them (saved to host memory now), before a short one those host memory holds already
        (the rest are saved after the first token), so that what this task restores and
        computes lands in the lowest free cells."""
        prompt, salt = task.request.prompt, task.request.cache_salt
        if slot.documents & self.forgotten:
            slot.erase(self.model)
        if not task.cache_prompt:
            if park:
                long = len(prompt) >= TAIL_BEFORE_PARK_MIN
                self.park_idle(long, slot, tails=long)
            self._cut(slot, 0, salt)
            return 0, "none"
        own = usable_prefix(prompt, slot.reusable_prefix(prompt, salt, task.request.approximate))
        if slot.repeat_logits(prompt, salt) is not None:
            own = len(prompt)  # an exact repeat: nothing to evaluate (Stepper.sample_repeat)
        donor, donor_n = self.scheduler.best_source(task, exclude=slot)
        donor_n = usable_prefix(prompt, donor_n)
        if donor is not None and donor.documents & self.forgotten:
            donor, donor_n = None, 0
        if donor is not None and not self.model.can_keep(donor.id, donor.cache.pos_at(donor_n)):
            donor, donor_n = None, 0  # its sliding window has moved past that prefix
        found, host_n = self._host_best(task)
        if park:  # before any restore
            if donor_n < MIN_SAVE_TOKENS:  # (a shared template header) not worth keeping a slot
                donor, donor_n = None, 0
            # Saving the idle slots before a short prefill would delay its first token more
            # than their cells slow it (a save into a fresh buffer pays page faults;
            # docs/kv-reuse.md, Measurements): those go after that token
            # (EngineLoop._park_pending), the others now.
            long = len(prompt) - max(own, donor_n, host_n) >= TAIL_BEFORE_PARK_MIN
            saves = self.stats.saves
            self.park_idle(long, slot, keep=donor, tails=long)
            if self.stats.saves != saves:  # an entry saved may replace one it wholly contains
                found, host_n = self._host_best(task)
        # A longer prefix on disk wins over host memory's (a shared tier holds other replicas'
        # conversations, which this one's host memory never saw).
        on_disk = self._disk_best(task)
        disk_n = usable_prefix(prompt, on_disk[1]) if on_disk else 0
        if found and host_n > max(own, donor_n) and host_n >= disk_n:
            self.save(slot, keep=0)
            if self._restore(slot, found.data, found.tokens, salt, "host"):
                slot.documents = found.documents
                if found.exact_n is not None:  # blended KV: approximate from there on
                    slot.blended_from = found.exact_n
                self.host.touch(found)
                return self._count("host", slot.cut_to(host_n, self.model))
        if on_disk and disk_n > max(own, donor_n, host_n):
            entry = on_disk[0]
            data = self._read(task, entry)
            if data is not None:
                self.save(slot, keep=0)
                if self._restore(slot, data, entry.tokens, entry.salt, "disk"):
                    slot.documents = entry.documents
                    # hot again: keep in RAM
                    self.host.store(salt, entry.tokens, data, slot.documents)
                    return self._count("disk", slot.cut_to(disk_n, self.model))
        if donor is not None and donor_n > own:
            self.save(slot, keep=0)
            slot.copy_prefix(donor, donor_n, self.model)
            return self._count("other_slot", donor_n)
        if self.shift_min_chunk and slot.salt == salt:
            self.save(slot, keep=own)  # before shifting rewrites the KV
            own = slot.shift_reuse(prompt, own, self.shift_min_chunk, self.model)
        return self._count("own_slot", self._cut(slot, own, salt))

    def _host_best(self, task: Task) -> tuple[HostEntry | None, int]:
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

    def park_idle(
        self,
        save: bool,
        admitted: Slot | None = None,
        keep: Slot | None = None,
        tails: bool = False,
    ) -> None:
        """Free the cells of idle slots (but `keep`) whose KV host memory holds, saving it
        first if `save`. What is left (the donor, slots not yet saved) goes in the engine's
        pass after the next step; a slot that cannot be saved (no room) waits for the next
        task's admission, not for every step.
        `tails`: the admitted task has a long prefill, so a slot's pending tail is decoded
        before the slot is saved (`prefill_tail`); otherwise it is dropped.

        llama.cpp's attention spans every KV cell up to the highest one in use, whichever
        sequence holds it: idle slots' cells slow every decode of the busy ones, and a
        sequence restored or computed while they are resident lands in higher cells and
        keeps the span long after they go, while saving and restoring cost far less than that
        (figures: docs/kv-reuse.md, Measurements). llama-server clears every idle
        slot when a task starts the same way (--cache-idle-slots); a conversation that comes
        back restores from host memory.
        Call from `prepare`, before it restores or computes anything."""
        for slot in self.scheduler.slots:
            if slot is admitted or slot is keep or not slot.idle or not len(slot.cache):
                continue  # (the admitted slot is not bound yet; the donor is copied after this)
            if save and tails and slot.tail and self.prefill_tail is not None:
                self.prefill_tail(slot)
            # Parking never evicts a host entry: with host memory full, the KV stays where it
            # is (parking that evicted left almost no warm prompt cached; docs/kv-reuse.md).
            if save and self.host.has_room(self.model.state_size(slot.id), len(slot.cache)):
                self.save(slot, keep=0)
            if self.host.covers(slot.salt, slot.cache) or len(slot.cache) < MIN_SAVE_TOKENS:
                slot.park(self.model)

    def unpark(self, slot: Slot) -> None:
        """Bring a parked idle slot's KV back from host memory (a slot save wants what the
        slot's conversation holds, wherever its KV sits now); nothing if host memory no longer
        has it."""
        if len(slot.cache) or slot.parked is None:
            return
        salt, tokens = slot.parked
        found = self.host.best(salt, tokens)
        if found is None:
            return
        entry, n = found
        if self._restore(slot, entry.data, entry.tokens, entry.salt, "host"):
            slot.documents = entry.documents
            slot.cut_to(n, self.model)

    def save(self, slot: Slot, keep: int) -> None:
        """Copy the slot's KV to host memory if keeping only `keep` tokens would lose enough."""
        if slot.blended_from is not None:  # the tiers hold exact KV under the tenant's salt
            if keep > slot.blended_from:
                return  # what is dropped is approximate; what is kept stays in the slot
            self._save_blended(slot)
            slot.cut_to(slot.blended_from, self.model)
        tokens = slot.cache
        lost = len(tokens) - keep
        if lost < MIN_SAVE_TOKENS or (keep > 0 and lost < MIN_SAVE_SHARE * len(tokens)):
            return
        if slot.documents & self.forgotten:
            return
        if self.host.covers(slot.salt, tokens):
            return
        t0 = time.perf_counter()
        size = self.model.state_size(slot.id)
        to_host = self.host.fits(size, len(tokens))
        if not to_host and self.disk is None:
            return
        blob = self.model.state_blob(slot.id, self.host.pool, size)
        if self.disk is not None:  # the writer holds its own reference
            self.disk.store(slot.salt, tokens, blob, slot.documents)
        if to_host:
            self.host.store(slot.salt, tokens, blob, slot.documents)  # takes over ours
        else:
            blob.release()
        self.stats.saves += 1
        self._timed("save", "host" if to_host else "disk", t0)

    def _save_blended(self, slot: Slot) -> None:
        """The whole of a slot's blended KV into host memory, under the blended salt, where
        only blend requests look (never to disk: the disk tier, shared by replicas, holds
        exact KV only); the exact part is saved apart, by `save`."""
        salt, tokens = blended_salt(slot.salt), slot.cache
        if len(tokens) - (slot.blended_from or 0) < MIN_SAVE_TOKENS:
            return
        if slot.documents & self.forgotten or self.host.covers(salt, tokens):
            return
        t0 = time.perf_counter()
        size = self.model.state_size(slot.id)
        if not self.host.has_room(size, len(tokens)):
            return  # approximate KV never evicts an entry
        blob = self.model.state_blob(slot.id, self.host.pool, size)
        entry = self.host.store(salt, tokens, blob, slot.documents)  # takes over our reference
        if entry is not None:
            entry.exact_n = slot.blended_from
        self.stats.saves += 1
        self._timed("save", "host", t0)

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
        on_disk = self._disk_best(task)
        if on_disk is None:
            return None
        prompt, salt = task.request.prompt, task.request.cache_salt
        found = self.host.best(salt, prompt)
        if found is not None and found[1] >= on_disk[1]:
            return None
        future = self.disk.read_async(on_disk[0])
        task.prefetched = (on_disk[0], future)
        return future

    def publish(self, slot: Slot) -> None:
        """Shared disk tier: a finished turn's KV is written now, not when its slot is next
        parked, so another replica can restore it if this one dies or the conversation's next
        turn goes elsewhere. Costs one state copy per turn on this thread (the file is written
        on the writer thread)."""
        if self.disk is not None and self.disk.shared and slot.blended_from is None:
            self.save(slot, keep=0)

    def _disk_best(self, task: Task) -> tuple[DiskEntry, int] | None:
        if self.disk is None:
            return None
        return self.disk.best(task.request.cache_salt, task.request.prompt)

    def _read(self, task: Task, entry: DiskEntry) -> bytes | None:
        """The entry's bytes: prefetched if it was, else read here (engine thread)."""
        prefetched, task.prefetched = task.prefetched, None
        if prefetched is not None and prefetched[0] is entry:
            return self.disk.finish_read(entry, prefetched[1].result())
        return self.disk.read(entry)

    def _timed(self, op: str, tier: str, t0: float) -> None:
        if self.on_op is not None:
            self.on_op(op, tier, time.perf_counter() - t0)

    def persist(self) -> None:
        """Save every slot's KV (at shutdown: the disk tier keeps it across a restart)."""
        for slot in self.scheduler.slots:
            self.save(slot, keep=0)

    def forget_documents(self, documents: set[str]) -> None:
        """A deleted document is never served again from any tier: host entries and disk files
        holding its chunks are dropped, idle slots holding them erased, busy ones marked."""
        self.forgotten |= documents
        self.host.forget_documents(documents)
        if self.disk is not None:
            self.disk.forget_documents(documents)
        for slot in self.scheduler.slots:
            if slot.idle and slot.documents & documents:
                slot.erase(self.model)

    def cached_length(self, salt: str, tokens: list[int]) -> int:
        """How many leading tokens of `tokens` some tier holds (slots, host, disk): the narrow
        question the RAG layout asks to put cached chunks first."""
        prompt = TokenSequence(tokens)
        best = 0
        for slot in self.scheduler.slots:
            if not slot.documents & self.forgotten:
                best = max(best, slot.reusable_prefix(prompt, salt))
        for tier in (self.host, self.disk):
            found = tier.best(salt, prompt) if tier is not None else None
            if found is not None:
                best = max(best, found[1])
        return best

    def reset(self) -> None:
        self.host.clear()
        if self.disk is not None:
            self.disk.clear()
        for slot in self.scheduler.slots:
            if slot.idle:
                slot.erase(self.model)

    def snapshot(self) -> ReuseStats:
        disk = self.disk
        return ReuseStats(
            dict(self.stats.hits),
            dict(self.stats.tokens),
            self.stats.saves,
            self.host.stats(),
            disk_entries=len(disk.entries) if disk is not None else 0,
            disk_bytes=disk.total_bytes if disk is not None else 0,
        )

    def _cut(self, slot: Slot, n: int, salt: str) -> int:
        self.save(slot, keep=n)
        kept = slot.cut_to(n, self.model)
        slot.salt = salt
        return kept

    def _restore(self, slot: Slot, data, tokens, salt: str, tier: str) -> bool:
        t0 = time.perf_counter()
        slot.erase(self.model)
        if not self.model.state_restore(slot.id, data):  # no room in the KV right now
            slot.erase(self.model)
            return False
        slot.cache = tokens.copy()
        slot.salt = salt
        self._timed("restore", tier, t0)
        return True

    def _count(self, tier: str, n: int) -> tuple[int, str]:
        if n == 0:
            return 0, "none"
        self.stats.hits[tier] += 1
        self.stats.tokens[tier] += n
        return n, tier
