"""`PrefixReuse` at unit level: a fake model whose KV is a map of positions to tokens, so every
assertion can compare what a slot says it holds (`slot.cache`) with what its KV sequence holds,
and what a host entry says it holds with the state it saved. Real `Slot`, `Scheduler`,
`HostCache` and `DiskCache`; hypothesis drives conversations over the slots. One test goes
through the packaged model (a host-memory round trip of a real KV state).

The real-path behaviour (which source serves which request, parking, timings) is in
test_engine.py; this file checks the invariants and the thresholds no real run reaches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cache.disk_cache import DiskCache
from app.cache.host_cache import HostCache
from app.engine.core.scheduler import Scheduler
from app.engine.core.slot import Slot, usable_prefix
from app.engine.engine_config import EngineConfig
from app.engine.kv.kv_tiers import MIN_SAVE_SHARE, MIN_SAVE_TOKENS
from app.engine.kv.prefix_reuse import LONG_PREFILL_MIN, PrefixReuse, worth_keeping
from app.engine.llama.model import Model
from app.engine.request import GenerationRequest
from app.engine.reuse_kinds import CacheSource, PrefixMatch
from app.engine.task import Task
from mm.token_sequence import TokenSequence

BIG = 1 << 30  # a host budget nothing here fills: no eviction


class FakeModel:
    """KV sequences as {position: token}; a saved state is the sequence's tokens as int32.

    `room = False`: a restore finds no room in the KV (llama.cpp's failed state_seq_set_data)."""

    can_shift = True

    def __init__(self) -> None:
        self.kv: dict[int, dict[int, int]] = {}
        self.room = True

    def cells(self, seq_id: int) -> dict[int, int]:
        return self.kv.setdefault(seq_id, {})

    def tokens(self, seq_id: int) -> list[int]:
        """The sequence's tokens; fails unless they sit at positions 0..n-1 with no hole."""
        cells = self.cells(seq_id)
        assert sorted(cells) == list(range(len(cells))), f"seq {seq_id} has holes: {cells}"
        return [cells[p] for p in range(len(cells))]

    def decode(self, slot: Slot, tokens: list[int]) -> None:
        """What a step does: tokens into the slot's KV and into its cache."""
        for i, token in enumerate(tokens):
            self.cells(slot.id)[slot.cache.n_pos + i] = token
        slot.cache.extend(tokens)

    # --- the KV calls PrefixReuse and Slot make ------------------------------------------------

    def can_keep(self, seq_id: int, pos: int) -> bool:
        return True

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        cells = self.cells(seq_id)
        for p in [p for p in cells if p >= max(p0, 0) and (p1 < 0 or p < p1)]:
            del cells[p]
        return True

    def seq_clear(self, seq_id: int) -> None:
        self.cells(seq_id).clear()

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        for p, token in list(self.cells(src).items()):
            if p >= max(p0, 0) and (p1 < 0 or p < p1):
                self.cells(dst)[p] = token

    def seq_shift(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        cells = self.cells(seq_id)
        moved = {p + delta if p0 <= p < p1 else p: t for p, t in cells.items()}
        cells.clear()
        cells.update(moved)

    def state_size(self, seq_id: int) -> int:
        return 4 * (len(self.cells(seq_id)) + 1)

    def state_save_into(self, seq_id: int, buf: bytearray) -> int:
        data = np.asarray(self.tokens(seq_id), dtype=np.int32).tobytes()
        buf[: len(data)] = data
        return len(data)

    state_blob = Model.state_blob  # the real one, over the two methods above

    def state_restore(self, seq_id: int, data: bytes | bytearray | memoryview) -> bool:
        if not self.room:
            return False
        tokens = np.frombuffer(bytes(data), dtype=np.int32).tolist()
        self.kv[seq_id] = dict(enumerate(tokens))
        return True


def saved_tokens(data: bytes | bytearray | memoryview) -> list[int]:
    return np.frombuffer(bytes(data), dtype=np.int32).tolist()


def make_reuse(
    model: FakeModel | Model, scheduler: Scheduler, host: HostCache, disk: DiskCache | None = None
) -> PrefixReuse:
    """The one place this file builds a PrefixReuse (its wiring may move into its constructor)."""
    return PrefixReuse(model, scheduler, host, disk)


class Rig:
    """One PrefixReuse and its collaborators, over the fake model."""

    def __init__(
        self, n_slots: int = 3, host_bytes: int = BIG, disk: DiskCache | None = None
    ) -> None:
        self.model = FakeModel()
        self.scheduler = Scheduler(n_slots, similarity=0.1)
        self.host = HostCache(host_bytes)
        self.reuse = make_reuse(self.model, self.scheduler, self.host, disk)

    def slot(self, i: int) -> Slot:
        return self.scheduler.slots[i]

    def hold(
        self, i: int, tokens: list[int], salt: str = "", docs: frozenset[str] = frozenset()
    ) -> Slot:
        """Slot i idle, its KV holding `tokens` (a finished request's prompt and reply)."""
        slot = self.slot(i)
        slot.erase(self.model)
        slot.salt, slot.documents = salt, docs
        self.model.decode(slot, tokens)
        return slot

    def prepare(
        self, i: int, tokens: list[int], salt: str = "", park: bool = False, cache: bool = True
    ) -> PrefixMatch:
        return self.reuse.prepare(task(tokens, salt, cache), self.slot(i), park)

    def assert_consistent(self) -> None:
        """Every slot's cache is exactly its KV; every host entry's state is its tokens."""
        for slot in self.scheduler.slots:
            assert self.model.tokens(slot.id) == list(slot.cache.tokens), f"slot {slot.id}"
        for entry in self.host.entries.values():
            assert saved_tokens(entry.data) == list(entry.tokens)


def task(tokens: list[int], salt: str = "", cache: bool = True) -> Task:
    return Task(GenerationRequest(TokenSequence(tokens), cache_salt=salt), lambda e: None, cache)


@pytest.fixture
def rig() -> Rig:
    return Rig()


BASE = list(range(100, 164))  # prompts share prefixes of it: long common prefixes are common


# --- invariants over conversations ---------------------------------------------------------------

turns = st.lists(
    st.tuples(
        st.integers(0, 2),  # slot
        st.integers(0, len(BASE)),  # how much of BASE the prompt starts with
        st.lists(st.integers(0, 3), min_size=1, max_size=6),  # what follows it
        st.sampled_from(["", "tenant-b"]),
        st.booleans(),  # park idle slots
        st.booleans(),  # cache_prompt
        st.lists(st.integers(0, 3), max_size=4),  # the reply decoded after the prompt
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=150, deadline=None)
@given(turns)
def test_the_slot_holds_the_longest_available_prefix_and_nothing_is_lost(turns):
    rig, served = Rig(), 0
    for i, cut, rest, salt, park, cache, reply in turns:
        prompt = TokenSequence([*BASE[:cut], *rest])
        slot = rig.slot(i)
        old, old_salt = list(slot.cache.tokens), slot.salt
        others = {
            s.id: (list(s.cache.tokens), s.salt) for s in rig.scheduler.slots if s is not slot
        }
        own = usable_prefix(prompt, slot.reusable_prefix(prompt, salt))
        shares = [
            (s, usable_prefix(prompt, s.reusable_prefix(prompt, salt)))
            for s in rig.scheduler.slots
            if s is not slot
        ]
        donor = max((n for _, n in shares), default=0)
        found = rig.host.best(salt, prompt)
        host = usable_prefix(prompt, found[1]) if found else 0
        long = len(prompt) - max(own, donor, host) >= LONG_PREFILL_MIN
        kept = any(n == donor and worth_keeping(s, n, long) for s, n in shares)

        match = rig.prepare(i, list(prompt.tokens), salt, park, cache)
        n, source = match.cached, match.source

        assert (n == 0) == (source is CacheSource.NONE)
        assert n == len(slot.cache) < len(prompt)  # the last prompt token is always evaluated
        assert list(slot.cache.tokens) == list(prompt.tokens[:n]) and slot.salt == salt
        if not cache:
            assert n == 0
        else:
            # A donor not worth keeping (`worth_keeping`) is parked for a parking admission;
            # what parking saves to host memory may still serve it from there.
            floor = donor if not park or kept else 0
            assert max(own, host, floor) <= n <= max(own, host, donor)
        rig.assert_consistent()
        # What the admitted slot dropped is in host memory when the loss was worth a save.
        lost = len(old) - n
        if lost >= MIN_SAVE_TOKENS and lost >= MIN_SAVE_SHARE * len(old):
            assert rig.host.covers(old_salt, TokenSequence(old))
        # The other slots keep their KV, or host memory holds it (parked).
        for other in rig.scheduler.slots:
            if other is not slot:
                tokens, other_salt = others[other.id]
                kept = list(other.cache.tokens) == tokens
                assert kept or (
                    not other.cache
                    and (
                        len(tokens) < MIN_SAVE_TOKENS
                        or rig.host.covers(other_salt, TokenSequence(tokens))
                    )
                )
        rig.model.decode(slot, [*prompt.tokens[n:], *reply])  # the request runs and ends
        served += n
    assert sum(rig.reuse.snapshot().tokens.values()) == served


# --- saving ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "keep", "saved"),
    [
        (100, 0, True),
        (MIN_SAVE_TOKENS - 1, 0, False),  # too short to be worth an entry
        (100, 100 - MIN_SAVE_TOKENS + 1, False),  # loses too few tokens
        (100, 76, False),  # loses 24%: a retry of the same conversation keeps most of it
        (100, 74, True),  # loses 26%
    ],
)
def test_a_slot_is_saved_only_when_it_would_lose_enough(rig: Rig, held, keep, saved):
    slot = rig.hold(0, list(range(held)))
    rig.reuse.save(slot, keep)
    assert rig.host.covers("", slot.cache) is saved
    assert rig.reuse.stats.saves == int(saved)
    rig.assert_consistent()


def test_a_slot_host_memory_covers_is_not_saved_again(rig: Rig):
    slot = rig.hold(0, list(range(40)))
    rig.reuse.save(slot, 0)
    rig.model.decode(slot, [])  # unchanged
    rig.reuse.save(slot, 0)
    slot.cut_to(30, rig.model)  # a prefix of the saved entry
    rig.reuse.save(slot, 0)
    assert rig.reuse.stats.saves == 1 and len(rig.host.entries) == 1


def test_save_reports_its_time_and_goes_to_disk_when_host_memory_is_too_small(tmp_path: Path):
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"not a model, only a fingerprint")
    disk = DiskCache(tmp_path / "kv", str(model_file))
    rig = Rig(host_bytes=16, disk=disk)  # no state of 40 tokens fits 16 bytes
    ops: list[tuple[str, str]] = []
    rig.reuse.tiers.on_op = lambda op, tier, seconds: ops.append((op, tier))
    slot = rig.hold(0, list(range(40)), salt="t", docs=frozenset({"doc-1"}))
    rig.reuse.save(slot, 0)
    disk.flush()  # the writer thread has written the file
    assert ops == [("save", "disk")] and not rig.host.entries
    [entry] = disk.entries.values()
    assert list(entry.tokens) == list(range(40)) and entry.documents == {"doc-1"}
    assert saved_tokens(disk.read(entry)) == list(range(40))


# --- sources -----------------------------------------------------------------------------------


def test_a_failed_restore_leaves_the_slot_empty_and_another_source_serves(rig: Rig):
    prompt = list(range(50))
    rig.hold(0, prompt[:40])
    rig.reuse.save(rig.slot(0), 0)
    rig.hold(0, prompt[:20])  # slot 0 now holds less than host memory
    rig.model.room = False
    assert rig.prepare(1, prompt) == PrefixMatch(20, CacheSource.OTHER_SLOT)
    rig.assert_consistent()
    rig.model.room = True
    assert rig.prepare(2, prompt) == PrefixMatch(40, CacheSource.HOST)
    rig.assert_consistent()


def test_salted_kv_serves_only_its_own_salt(rig: Rig):
    prompt = list(range(30))
    rig.hold(0, prompt, salt="a")
    rig.reuse.save(rig.slot(0), 0)
    assert rig.reuse.cached_length("a", prompt) == 30
    assert rig.reuse.cached_length("b", prompt) == 0
    assert rig.prepare(1, prompt, salt="b") == PrefixMatch(0, CacheSource.NONE)
    assert rig.prepare(2, prompt, salt="a") == PrefixMatch(29, CacheSource.OTHER_SLOT)
    rig.assert_consistent()


def test_cache_prompt_false_recomputes_but_saves_what_the_slot_held(rig: Rig):
    rig.hold(0, list(range(40)))
    assert rig.prepare(0, list(range(50)), cache=False) == PrefixMatch(0, CacheSource.NONE)
    assert rig.host.covers("", TokenSequence(range(40)))
    rig.assert_consistent()


def test_a_prefix_only_on_disk_is_prefetched_then_restored_and_kept_in_memory(tmp_path: Path):
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"fingerprint")
    disk = DiskCache(tmp_path / "kv", str(model_file))
    rig = Rig(host_bytes=BIG, disk=disk)
    woken = threading.Event()
    rig.reuse.tiers.wake = woken.set
    prompt = list(range(60))
    rig.hold(0, prompt[:48])
    rig.reuse.save(rig.slot(0), 0)  # to host memory and disk
    rig.host.clear()
    rig.slot(0).erase(rig.model)
    t = task(prompt)
    rig.reuse.prefetch(t)
    assert t.waiting_for is not None and t.prefetched is not None
    assert woken.wait(timeout=600)  # the engine loop is woken when the read is done
    assert rig.reuse.prepare(t, rig.slot(1)) == PrefixMatch(48, CacheSource.DISK)
    assert t.prefetched is None
    assert rig.host.covers("", TokenSequence(prompt[:48]))  # hot again
    rig.assert_consistent()
    disk.flush()


def test_a_longer_prefix_on_disk_wins_over_a_shorter_one_in_host_memory(tmp_path: Path):
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"fingerprint")
    disk = DiskCache(tmp_path / "kv", str(model_file))
    rig = Rig(host_bytes=BIG, disk=disk)
    prompt = list(range(60))
    rig.hold(0, prompt[:48])
    rig.reuse.save(rig.slot(0), 0)  # host memory and disk hold 48
    rig.host.clear()
    rig.hold(0, prompt[:20])
    rig.reuse.save(rig.slot(0), 0)  # host memory holds 20 only
    rig.slot(0).erase(rig.model)
    assert rig.prepare(1, prompt) == PrefixMatch(48, CacheSource.DISK)
    rig.assert_consistent()
    disk.flush()


def test_shared_disk_a_finished_turn_is_published_and_another_replica_restores_it(
    tmp_path: Path,
):
    """--cache-shared: replica A publishes a turn's KV when it ends (no parking needed);
    replica B, asked the next turn, looks up A's news before admitting it and restores it."""
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"fingerprint")
    disk_a = DiskCache(tmp_path / "kv", str(model_file), journal="a")
    disk_b = DiskCache(tmp_path / "kv", str(model_file), journal="b")
    a, b = Rig(disk=disk_a), Rig(disk=disk_b)
    b.reuse.tiers.wake = lambda: None
    conversation = list(range(50))
    a.reuse.publish(a.hold(0, conversation))
    disk_a.flush()  # A's writer has written and journaled it
    t = task(conversation + [7, 8, 9])
    b.reuse.prefetch(t)
    assert t.waiting_for is not None
    t.waiting_for.result()
    assert b.reuse.prepare(t, b.slot(0)) == PrefixMatch(50, CacheSource.DISK)
    b.assert_consistent()
    disk_b.flush()


def test_without_a_shared_disk_a_finished_turn_is_not_written(tmp_path: Path):
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"fingerprint")
    disk = DiskCache(tmp_path / "kv", str(model_file))
    rig = Rig(disk=disk)
    rig.reuse.publish(rig.hold(0, list(range(50))))
    assert not disk.entries and not rig.host.entries


# --- parking -----------------------------------------------------------------------------------


@pytest.mark.parametrize("long", [True, False])
def test_parking_saves_idle_slots_before_a_long_prefill_and_drops_their_tails(rig: Rig, long: bool):
    a = rig.hold(0, list(range(1000, 1040)))
    a.tail, a.session = [7, 8], "conversation-a"
    b = rig.hold(1, list(range(2000, 2010)))  # too short to save: parked without a copy
    prompt = list(range(3000, 3000 + (300 if long else 20)))
    assert rig.prepare(2, prompt, park=True) == PrefixMatch(0, CacheSource.NONE)
    saved = TokenSequence(list(range(1000, 1040)))
    if long:  # saved as it was (its tail never decoded: the next turn computes it), cells freed
        assert rig.host.covers("", saved) and not a.cache and a.tail is None
        assert not rig.host.covers("", TokenSequence([*saved.tokens, 7, 8]))
    else:  # saved after the first token (Engine._park_pending), not now; the tail still waits
        assert not rig.host.entries and list(a.cache.tokens) == list(saved.tokens)
        assert a.tail == [7, 8]
    assert not b.cache and a.session == "conversation-a"  # parking keeps the claim
    rig.assert_consistent()


def test_a_long_prefill_parks_but_keeps_the_donor_and_never_evicts_a_host_entry():
    rig = Rig(n_slots=4, host_bytes=4 * 45)  # room for one state of 40 tokens
    saved = rig.hold(0, list(range(500, 540)))
    rig.reuse.save(saved, 0)
    entries = set(rig.host.entries)
    other = rig.hold(1, list(range(600, 640)))  # no room left to save it: it stays
    donor = rig.hold(2, list(range(30)))
    prompt = [*range(30), *range(5000, 5300)]  # 300 tokens to compute: idle slots go now
    assert rig.prepare(3, prompt, park=True) == PrefixMatch(30, CacheSource.OTHER_SLOT)
    assert set(rig.host.entries) == entries
    assert not saved.cache  # host memory holds it: its cells are freed
    assert list(other.cache.tokens) == list(range(600, 640))
    assert list(donor.cache.tokens) == list(range(30))
    rig.assert_consistent()


def test_a_donor_sharing_only_a_short_header_parks_and_host_memory_serves_its_prefix(rig: Rig):
    """A slot that shares a chat header with a long new prompt is not kept resident for it: its
    cells would sit below the new ones for the task's whole life (every decode attending over
    them). It parks like the others and the header comes back from host memory."""
    donor = rig.hold(0, [*range(20), *range(7000, 7200)])
    prompt = [*range(20), *range(5000, 5300)]
    assert rig.prepare(1, prompt, park=True) == PrefixMatch(20, CacheSource.HOST)
    assert not donor.cache and rig.host.covers("", TokenSequence([*range(20), *range(7000, 7200)]))
    rig.assert_consistent()


@pytest.mark.parametrize(
    ("shared", "held", "kept"),
    [(20, 220, False), (16, 30, True), (15, 20, False), (120, 220, True)],
)
def test_a_donor_is_worth_keeping_for_at_least_half_of_what_it_holds(shared, held, kept):
    donor = Slot(0)
    donor.cache = TokenSequence(list(range(held)))
    assert worth_keeping(donor, shared) is kept
    # Before a short prefill the donor stays (parked after the first token) if it is worth a
    # slot at all.
    assert worth_keeping(donor, shared, long=False) is (shared >= MIN_SAVE_TOKENS)


# --- deleted documents -------------------------------------------------------------------------


def test_a_forgotten_document_is_never_served_again_from_any_tier(rig: Rig):
    prompt = list(range(40))
    rig.hold(0, prompt, docs=frozenset({"doc-1"}))
    rig.reuse.save(rig.slot(0), 0)
    busy = rig.hold(1, prompt, docs=frozenset({"doc-1"}))
    busy.task = task(prompt)  # generating: its KV cannot be erased now
    clean = rig.hold(2, prompt[:10])
    rig.reuse.forget_documents({"doc-1"})
    assert not rig.slot(0).cache and not rig.host.entries
    assert list(busy.cache.tokens) == prompt  # marked, not erased
    assert rig.reuse.cached_length("", prompt) == 10  # only the clean slot counts
    busy.release()
    rig.reuse.save(busy, 0)  # a slot holding a forgotten document is never saved
    assert not rig.host.entries
    assert rig.prepare(0, prompt).cached <= 10  # not the busy slot's 40
    # erased before its next use
    assert rig.prepare(1, prompt) == PrefixMatch(10, CacheSource.OTHER_SLOT)
    assert busy.documents == frozenset()
    assert clean.cache.tokens == tuple(prompt[:10])
    rig.assert_consistent()


def test_reset_empties_host_memory_and_idle_slots_but_not_busy_ones(rig: Rig):
    rig.hold(0, list(range(40)))
    rig.reuse.save(rig.slot(0), 0)
    busy = rig.hold(1, list(range(20)))
    busy.task = task([1])
    rig.reuse.reset()
    assert not rig.host.entries and not rig.slot(0).cache and len(busy.cache) == 20
    rig.assert_consistent()


# --- the real model ----------------------------------------------------------------------------


@pytest.fixture
def real_model(model_path: str) -> Iterator[Model]:
    model = Model(EngineConfig(model_path=model_path, n_ctx=512, n_parallel=2, warmup=False))
    model.compute.claim()
    try:
        yield model
    finally:
        model.close()


def test_a_real_state_saved_to_host_memory_restores_into_another_slot(real_model: Model):
    model = real_model
    scheduler = Scheduler(2, similarity=0.1)
    reuse = make_reuse(model, scheduler, HostCache(BIG))
    tokens = model.tokenize("The lighthouse keeper wrote in the log every night, " * 3)
    batch = model.new_batch()
    batch.add_run(tokens, 0, 0)
    assert model.decode(batch) == 0
    batch.close()
    first = scheduler.slots[0]
    first.cache.extend(tokens)
    reuse.save(first, 0)
    first.erase(model)
    prompt = [*tokens, *model.tokenize(" And then", add_special=False)]
    found = reuse.prepare(task(prompt), scheduler.slots[1])
    assert found == PrefixMatch(len(tokens), CacheSource.HOST)
    assert model.seq_pos_max(1) == len(tokens) - 1 and model.seq_pos_max(0) == -1
