"""`PrefixReuse`: puts the longest reusable prefix of a prompt into a slot's KV.

Sources, cheapest first: the slot's own KV (nothing to do), another slot's KV (shared cells via
llama_memory_seq_cp, also while that slot generates), a host-memory copy (restored and trimmed),
a file of the disk tier (read, checked, restored, and kept in host memory again).
Before a slot loses a meaningful part of its KV, that KV is saved to host memory, so a
conversation whose slot was taken gets its prefix back on whichever slot it lands. Idle slots'
KV is parked (saved, then its cells freed) before an admission places new KV (`park_idle`).
Engine thread only; everything here runs between decode steps, so every stream waits for it.

How the KV moves to and from the host and disk tiers (saves, restores, disk reads ahead of
admission, the save thresholds) is `KvTiers` (app/engine/kv/kv_tiers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.cache.disk_cache import DiskCache
from app.cache.host_cache import HostCache, HostCacheStats
from app.engine.core.scheduler import Scheduler
from app.engine.core.slot import Slot, usable_prefix
from app.engine.kv.kv_tiers import MIN_SAVE_TOKENS, KvTiers
from app.engine.llama.model import Model
from app.engine.reuse_kinds import TIERS, CacheSource, PrefixMatch
from app.engine.task import Task
from mm.token_sequence import TokenSequence

# Fewest tokens a task must prefill for the idle slots it parks to be saved before it starts:
# their cells would slow all of that prefill, which costs far more than the saves. Before a
# shorter one the saves wait until its first token is out (docs/kv-reuse.md, Measurements).
LONG_PREFILL_MIN = 256


@dataclass(slots=True)
class ReuseStats:
    hits: dict[CacheSource, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    tokens: dict[CacheSource, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    saves: int = 0
    host: HostCacheStats | None = None
    disk_entries: int = 0
    disk_bytes: int = 0  # files of the disk tier, counted against --cache-disk


def worth_keeping(donor: Slot, n: int, long: bool = True) -> bool:
    """Whether an idle slot whose first `n` tokens a task shares stays resident for it to copy.

    A copy shares the donor's cells, and the rest of the donor's KV stays in place until the
    first step is out: the task's new cells land above all of it, and every decode of the task
    attends over that span for its whole life. That is worth it for a prefix that is at least
    half of what the donor holds (a shared document, a long system prompt), not for a shared
    chat-template header before a different prompt (measured: a cold 800-token prompt was
    5-8% slower than llama-server's). Otherwise the donor is parked like any idle slot and
    the prefix comes from host memory (saved as it parks) into the lowest free cells, or is
    computed. Before a short prefill (`long` false) the span hardly matters and saving the
    donor now would delay the first token: it stays, and parks after that token. A prefix
    under MIN_SAVE_TOKENS is never worth a slot."""
    return n >= MIN_SAVE_TOKENS and (not long or 2 * n >= len(donor.cache))


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
    ) -> None:
        self.model = model
        self.shift_min_chunk = shift_min_chunk  # --cache-reuse; 0 = no KV shifting
        self.scheduler = scheduler
        self.host = host
        self.disk = disk
        self.stats = ReuseStats()
        # Deleted documents: a busy slot may still hold their chunks; it is never a source
        # again and is erased before its next use (idle ones are erased at once).
        self.forgotten: set[str] = set()
        # wake: the engine loop (a prefetch finished); on_op: (op, tier, seconds) of each save
        # and restore.
        self.tiers = KvTiers(model, host, disk, self.forgotten, wake, on_op)

    def prepare(self, task: Task, slot: Slot, park: bool = False) -> PrefixMatch:
        """Fill the slot's KV with the best prefix; returns how much and from where. `park`:
        first free the other idle slots' cells (`park_idle`): before a long prefill all of
        them (saved to host memory now), before a short one those host memory holds already
        (the rest are saved after the first token), so that what this task restores and
        computes lands in the lowest free cells."""
        prompt, salt = task.request.prompt, task.request.cache_salt
        if slot.documents & self.forgotten:
            slot.erase(self.model)
        if not task.cache_prompt:
            if park:
                long = len(prompt) >= LONG_PREFILL_MIN
                self.park_idle(long, slot)
            self._cut(slot, 0, salt)
            return PrefixMatch()
        own = usable_prefix(prompt, slot.reusable_prefix(prompt, salt, task.request.approximate))
        if slot.repeat_logits(prompt, salt) is not None:
            own = len(prompt)  # an exact repeat: nothing to evaluate (Stepper.sample_repeat)
        donor, donor_n = self.scheduler.best_source(task, exclude=slot)
        donor_n = usable_prefix(prompt, donor_n)
        if donor is not None and donor.documents & self.forgotten:
            donor, donor_n = None, 0
        if donor is not None and not self.model.can_keep(donor.id, donor.cache.pos_at(donor_n)):
            donor, donor_n = None, 0  # its sliding window has moved past that prefix
        found, host_n = self.tiers.host_best(task)
        if park:  # before any restore
            # Saving the idle slots before a short prefill would delay its first token more
            # than their cells slow it (a save into a fresh buffer pays page faults;
            # docs/kv-reuse.md, Measurements): those go after that token
            # (EngineLoop._park_pending), the others now.
            long = len(prompt) - max(own, donor_n, host_n) >= LONG_PREFILL_MIN
            if donor is not None and not worth_keeping(donor, donor_n, long):
                donor, donor_n = None, 0  # parked like the others; host memory serves its prefix
            saves = self.stats.saves
            self.park_idle(long, slot, keep=donor)
            if self.stats.saves != saves:  # an entry saved may replace one it wholly contains
                found, host_n = self.tiers.host_best(task)
        # A longer prefix on disk wins over host memory's (a shared tier holds other replicas'
        # conversations, which this one's host memory never saw).
        on_disk = self.tiers.disk_best(task)
        disk_n = usable_prefix(prompt, on_disk[1]) if on_disk else 0
        if found and host_n > max(own, donor_n) and host_n >= disk_n:
            self.save(slot, keep=0)
            if self.tiers.restore(slot, found.data, found.tokens, salt, CacheSource.HOST):
                slot.documents = found.documents
                if found.exact_n is not None:  # blended KV: approximate from there on
                    slot.blended_from = found.exact_n
                self.host.touch(found)
                return self._count(CacheSource.HOST, slot.cut_to(host_n, self.model))
        if on_disk and disk_n > max(own, donor_n, host_n):
            entry = on_disk[0]
            data = self.tiers.read(task, entry)
            if data is not None:
                self.save(slot, keep=0)
                if self.tiers.restore(slot, data, entry.tokens, entry.salt, CacheSource.DISK):
                    slot.documents = entry.documents
                    # hot again: keep in RAM
                    self.host.store(salt, entry.tokens, data, slot.documents)
                    return self._count(CacheSource.DISK, slot.cut_to(disk_n, self.model))
        if donor is not None and donor_n > own:
            self.save(slot, keep=0)
            slot.copy_prefix(donor, donor_n, self.model)
            return self._count(CacheSource.OTHER_SLOT, donor_n)
        if self.shift_min_chunk and slot.salt == salt:
            self.save(slot, keep=own)  # before shifting rewrites the KV
            own = slot.shift_reuse(prompt, own, self.shift_min_chunk, self.model)
        return self._count(CacheSource.OWN_SLOT, self._cut(slot, own, salt))

    def park_idle(
        self,
        save: bool,
        admitted: Slot | None = None,
        keep: Slot | None = None,
    ) -> None:
        """Free the cells of idle slots (but `keep`) whose KV host memory holds, saving it
        first if `save`. What is left (the donor, slots not yet saved) goes in the engine's
        pass after the next step; a slot that cannot be saved (no room) waits for the next
        task's admission, not for every step.
        A parked slot's pending tail (its conversation's next-turn boundary, queued for idle
        time) is dropped, not decoded first: alone it costs a whole decode step on this task's
        path, where that conversation's next turn computes its few tokens with its own prompt
        for a small share of that (docs/kv-reuse.md, Measurements).

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
            # Parking never evicts a host entry: with host memory full, the KV stays where it
            # is (parking that evicted left almost no warm prompt cached; docs/kv-reuse.md).
            if save and self.host.has_room(self.model.state_size(slot.id), len(slot.cache)):
                self.save(slot, keep=0)
            if self.host.covers(slot.salt, slot.cache) or len(slot.cache) < MIN_SAVE_TOKENS:
                slot.park(self.model)

    def warm_for_parking(self) -> bool:
        """One piece of work making ready the buffers that parking the idle slots would save
        into now (`StatePool.warm`); False when they are ready. The engine calls it while it has
        nothing else to do: those saves come on the path of the next prompt that parks them."""
        sizes = []
        for slot in self.scheduler.slots:
            if not slot.idle or len(slot.cache) < MIN_SAVE_TOKENS or slot.blended_from is not None:
                continue
            if not self.tiers.unsaved(slot):
                continue
            size = self.model.state_size(slot.id)
            if self.host.has_room(size, len(slot.cache)):
                sizes.append(size)
        return bool(sizes) and self.host.pool.warm(sizes)

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
        if self.tiers.restore(slot, entry.data, entry.tokens, entry.salt, CacheSource.HOST):
            slot.documents = entry.documents
            slot.cut_to(n, self.model)

    def save(self, slot: Slot, keep: int) -> None:
        """Copy the slot's KV to host memory if keeping only `keep` tokens would lose enough
        (`KvTiers.save`); counts the entries stored."""
        self.stats.saves += self.tiers.save(slot, keep)

    def prefetch(self, task: Task) -> None:
        """Read a queued task's best prefix ahead of its admission if only disk holds it
        (`KvTiers.prefetch`)."""
        self.tiers.prefetch(task)

    def publish(self, slot: Slot) -> None:
        """Shared disk tier: a finished turn's KV is written now, not when its slot is next
        parked, so another replica can restore it if this one dies or the conversation's next
        turn goes elsewhere. Costs one state copy per turn on this thread (the file is written
        on the writer thread)."""
        if self.disk is not None and self.disk.shared and slot.blended_from is None:
            self.save(slot, keep=0)

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

    def _count(self, tier: CacheSource, n: int) -> PrefixMatch:
        if n == 0:
            return PrefixMatch()
        self.stats.hits[tier] += 1
        self.stats.tokens[tier] += n
        return PrefixMatch(n, tier)
