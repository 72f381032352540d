"""`Stepper` at unit level: a fake model (its batches are lists, its KV a map of positions to
tokens, its logits pick token + 1), a fake sampler that takes the argmax, the real `Scheduler`,
`Slot` and `Task`. Checks what one step does with the plan (decode, commit, sample, deliver),
what it does when llama_decode fails, idle tails, repeats, images and logprobs. One test steps
the packaged model to the end of a request.

The engine's real-path behaviour (batching across streams, prefix reuse) is in test_engine.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from app.cache.host_cache import HostCache
from app.engine.background_pacer import BackgroundPacer
from app.engine.core.scheduler import Scheduler
from app.engine.core.slot import Slot
from app.engine.core.stepper import Stepper, token_logprob
from app.engine.engine_config import EngineConfig
from app.engine.events import Event, Failed, Finished, TextDelta
from app.engine.kv.prefix_reuse import PrefixReuse
from app.engine.llama.model import Model
from app.engine.request import GenerationRequest
from app.engine.reuse_kinds import PrefixMatch
from app.engine.sampler import Sampler, SamplingParams
from app.engine.task import Task
from mm.token_sequence import TokenSequence

VOCAB = 8
EOG = 7  # end of generation: a prompt ending on 6 samples it


class FakeBatch:
    """The `Batch` calls the scheduler and the stepper make; rows are (token, pos, seq, logits)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.rows: list[tuple[int, int, int, bool]] = []
        self.closed = False

    @property
    def n_tokens(self) -> int:
        return len(self.rows)

    @property
    def free(self) -> int:
        return self.capacity - len(self.rows)

    def clear(self) -> None:
        self.rows = []

    def add(self, token: int, pos: int, seq_id: int, logits: bool) -> int:
        if self.free == 0:
            raise IndexError("batch is full")
        self.rows.append((token, pos, seq_id, logits))
        return len(self.rows) - 1

    def add_run(self, tokens: list[int], pos: int, seq_id: int) -> None:
        for i, token in enumerate(tokens):
            self.add(token, pos + i, seq_id, False)

    def close(self) -> None:
        self.closed = True


class FakeModel:
    """`statuses`: what the next llama_decode calls return (then 0). A decode that fails writes
    nothing (llama.cpp finds cells for every ubatch before it computes any: 1 = none found)."""

    ctx = "ctx"
    bos = 1

    def __init__(self, capacity: int = 16) -> None:
        self.capacity = capacity
        self.statuses: list[int] = []
        self.decoded: list[list[tuple[int, int, int, bool]]] = []  # every decode's rows
        self.kv: dict[int, dict[int, int]] = {}
        self._rows: list[tuple[int, int, int, bool]] = []  # the last successful decode's
        self.cleared = 0

    def tokens(self, seq_id: int) -> list[int]:
        cells = self.kv.get(seq_id, {})
        assert sorted(cells) == list(range(len(cells))), f"seq {seq_id} has holes: {cells}"
        return [cells[p] for p in range(len(cells))]

    def new_batch(self) -> FakeBatch:
        return FakeBatch(self.capacity)

    def decode(self, batch: FakeBatch) -> int:
        status = self.statuses.pop(0) if self.statuses else 0
        self.decoded.append(list(batch.rows))
        if status == 0:
            for token, pos, seq, _ in batch.rows:
                self.kv.setdefault(seq, {})[pos] = token
            self._rows = list(batch.rows)
        return status

    def logits(self, row: int) -> np.ndarray:
        token, _, _, wants = self._rows[row]
        assert wants, "logits read from a row that did not ask for them"
        out = np.zeros(VOCAB, dtype=np.float32)
        out[(token + 1) % VOCAB] = 5.0
        return out

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        return f"<{token}>".encode()

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def clear(self) -> None:
        self.kv.clear()
        self.cleared += 1

    # the KV calls of Slot.erase / cut_to
    def can_keep(self, seq_id: int, pos: int) -> bool:
        return True

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        cells = self.kv.setdefault(seq_id, {})
        for p in [p for p in cells if p >= max(p0, 0) and (p1 < 0 or p < p1)]:
            del cells[p]
        return True

    def seq_clear(self, seq_id: int) -> None:
        self.kv.pop(seq_id, None)


class ArgmaxSampler:
    def __init__(self, model: FakeModel) -> None:
        self.model = model
        self.closed = False

    def sample(self, ctx: object, row: int) -> int:
        return int(self.model.logits(row).argmax())

    def sample_logits(self, logits: np.ndarray) -> int:
        return int(logits.argmax())

    def close(self) -> None:
        self.closed = True


class FakeReuse:
    """What make_room asks of PrefixReuse: save an idle slot before its KV goes."""

    def __init__(self) -> None:
        self.saved: list[tuple[int, list[int]]] = []

    def save(self, slot: Slot, keep: int) -> None:
        self.saved.append((slot.id, list(slot.cache.tokens)))


class FakeVision:
    """Puts nothing in the KV; fails for the tasks listed in `fails`."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.fails: set[int] = set()

    def prefill_next(self, task: Task, slot: Slot) -> None:
        self.calls.append(task.id)
        if task.id in self.fails:
            slot.cache.extend([0])  # half an image in the KV
            raise RuntimeError("the projector failed")


@dataclass
class Rig:
    """One Stepper and its collaborators, built in one place (`rig` fixture)."""

    model: FakeModel
    scheduler: Scheduler
    reuse: FakeReuse
    stepper: Stepper
    events: dict[int, list[Event]] = field(default_factory=dict)

    def admit(self, prompt: list[int], slot: int = 0, **request: object) -> Task:
        """What Engine._admit does once PrefixReuse has prepared the slot."""
        events: list[Event] = []
        t = Task(GenerationRequest(TokenSequence(prompt), **request), events.append, True)
        self.events[t.id] = events
        s = self.scheduler.slots[slot]
        t.start(s.id, PrefixMatch(len(s.cache)), ArgmaxSampler(self.model))
        self.scheduler.bind(t, s)
        t.on_close = lambda: self.scheduler.release(t)
        return t

    def hold(self, slot: int, tokens: list[int]) -> Slot:
        """An idle slot whose KV holds `tokens`."""
        s = self.scheduler.slots[slot]
        for i, token in enumerate(tokens):
            self.model.kv.setdefault(s.id, {})[s.cache.n_pos + i] = token
        s.cache.extend(tokens)
        return s

    def text(self, t: Task) -> str:
        return "".join(e.text for e in self.events[t.id] if isinstance(e, TextDelta))

    def end(self, t: Task) -> Event | None:
        ends = [e for e in self.events[t.id] if isinstance(e, Finished | Failed)]
        assert len(ends) <= 1
        return ends[0] if ends else None

    def assert_consistent(self) -> None:
        for s in self.scheduler.slots:
            assert self.model.tokens(s.id) == list(s.cache.tokens), f"slot {s.id}"


def make_stepper(
    model: FakeModel | Model,
    scheduler: Scheduler,
    reuse: FakeReuse | PrefixReuse,
    n_ctx_request: int,
    vision: FakeVision | None = None,
) -> Stepper:
    """The one place this file builds a Stepper (its wiring may move into its constructor)."""
    pacer = BackgroundPacer(budget_s=0.05, capacity=16)
    return Stepper(model, scheduler, reuse, n_ctx_request, pacer, vision)


def make_rig(
    capacity: int = 16, n_slots: int = 2, n_ctx_request: int = 64, vision: FakeVision | None = None
) -> Rig:
    model, reuse = FakeModel(capacity), FakeReuse()
    scheduler = Scheduler(n_slots, similarity=0.1)
    stepper = make_stepper(model, scheduler, reuse, n_ctx_request, vision)
    return Rig(model, scheduler, reuse, stepper)


@pytest.fixture
def rig() -> Rig:
    return make_rig()


# --- one step ----------------------------------------------------------------------------------


def test_a_step_decodes_generation_before_prefill_commits_and_samples_the_rows_that_asked(
    rig: Rig,
):
    a = rig.admit([1, 2, 3], slot=0)
    rig.stepper.step()
    assert rig.model.decoded == [[(1, 0, 0, False), (2, 1, 0, False), (3, 2, 0, True)]]
    assert a.next_token == 4 and rig.text(a) == "<4>"
    first = rig.scheduler.slots[0]
    kept = first.repeat_logits(TokenSequence([1, 2, 3]), "")
    assert kept is not None and int(kept.argmax()) == 4  # an exact repeat may sample from them

    b = rig.admit([5, 6], slot=1)
    rig.stepper.step()
    assert rig.model.decoded[-1] == [(4, 3, 0, True), (5, 0, 1, False), (6, 1, 1, True)]
    assert a.next_token == 5 and rig.text(a) == "<4><5>"
    # B sampled end-of-generation: it ended, its slot is free, and 7 was never decoded.
    end = rig.end(b)
    assert isinstance(end, Finished) and end.finish_reason == "stop"
    assert rig.scheduler.slots[1].idle and list(rig.scheduler.slots[1].cache.tokens) == [5, 6]
    assert list(first.cache.tokens) == [1, 2, 3, 4]
    rig.assert_consistent()


def test_a_prompt_longer_than_the_batch_is_prefilled_over_steps_and_sampled_once():
    rig = make_rig(capacity=4)
    a = rig.admit(list(range(10)), slot=0)
    for n_done in (4, 8):
        rig.stepper.step()
        assert a.n_done == n_done and a.next_token is None and not rig.events[a.id]
    rig.stepper.step()
    assert [len(rows) for rows in rig.model.decoded] == [4, 4, 2]
    assert [row[3] for rows in rig.model.decoded for row in rows].count(True) == 1
    assert a.next_token == 2 and rig.text(a) == "<2>"  # 9 + 1 wraps to 2
    rig.assert_consistent()


def test_a_request_ends_with_length_when_its_share_of_the_kv_is_full():
    rig = make_rig(n_ctx_request=5)
    a = rig.admit([1, 2, 3])
    rig.stepper.step()  # prompt in, 4 sampled: room for one more after it
    assert rig.end(a) is None
    rig.stepper.step()  # 4 in, 5 sampled: the share is full
    end = rig.end(a)
    assert isinstance(end, Finished) and end.finish_reason == "length"
    assert end.completion_tokens == 2 and rig.text(a) == "<4><5>"
    assert len(rig.scheduler.slots[0].cache) == 4 < 5
    rig.assert_consistent()


def test_logprobs_come_with_each_token_when_asked(rig: Rig):
    a = rig.admit([1, 2], logprobs=2)
    rig.stepper.step()
    [delta] = [e for e in rig.events[a.id] if isinstance(e, TextDelta)]
    [lp] = delta.logprobs
    assert lp.token == "<3>" and len(lp.top) == 2 and lp.top[0][0] == "<3>"
    assert lp.logprob == pytest.approx(lp.top[0][1])


# --- when llama_decode fails -------------------------------------------------------------------


def test_a_full_kv_drops_speculative_tails_first_then_saves_and_erases_an_idle_slot():
    rig = make_rig(n_slots=3)
    idle = rig.hold(1, [4, 4, 4])
    idle.tail, idle.last_used = [5], 1.0
    other = rig.hold(2, [6, 6])
    other.last_used = 2.0  # used more recently: kept
    a = rig.admit([1, 2, 3], slot=0)
    rig.model.statuses = [1, 1]
    rig.stepper.step()  # KV full: the tail goes, nothing is committed
    assert idle.tail is None and a.n_done == 0 and not rig.events[a.id]
    assert list(idle.cache.tokens) == [4, 4, 4] and not rig.reuse.saved
    rig.stepper.step()  # still full: the least recently used idle slot is saved, then erased
    assert rig.reuse.saved == [(1, [4, 4, 4])] and not idle.cache and a.n_done == 0
    rig.stepper.step()
    assert a.n_done == 3 and a.next_token == 4
    assert list(other.cache.tokens) == [6, 6]
    rig.assert_consistent()


def test_a_full_kv_with_no_idle_slot_fails_the_largest_generating_task_as_llama_server():
    rig = make_rig(n_slots=2)
    a = rig.admit([1, 2, 3, 4], slot=0)
    b = rig.admit([5], slot=1)
    rig.stepper.step()  # both prefilled: they generate from here on
    rig.model.statuses = [1]
    rig.stepper.step()  # KV full, nothing idle to free: the task holding the most KV stops
    end = rig.end(a)
    assert isinstance(end, Failed) and (end.status, end.code) == (500, "server_error")
    assert end.message.startswith("Context size has been exceeded")
    assert rig.end(b) is None  # the other goes on
    rig.stepper.step()
    assert not isinstance(rig.end(b), Failed) and rig.text(b)
    rig.assert_consistent()


def test_a_decode_error_raises_commits_nothing_and_fail_active_frees_the_slots(rig: Rig):
    a = rig.admit([1, 2, 3], slot=0)
    rig.stepper.step()  # A generates from here on
    b = rig.admit([4], slot=1)
    rig.model.statuses = [-3]
    with pytest.raises(RuntimeError, match="llama_decode returned -3"):
        rig.stepper.step()
    assert a.next_token == 4 and b.n_done == 0
    assert list(rig.scheduler.slots[0].cache.tokens) == [1, 2, 3]
    rig.stepper.fail_active()  # the KV of a failed step may be half written: erased
    for t in (a, b):
        end = rig.end(t)
        assert isinstance(end, Failed) and end.status == 500
        assert "internal error" in end.message
    assert not rig.scheduler.active
    assert all(s.idle and not s.cache for s in rig.scheduler.slots)
    rig.assert_consistent()


# --- repeats, images --------------------------------------------------------------------------


def test_an_exact_repeat_samples_from_the_kept_logits_without_a_decode(rig: Rig):
    rig.admit([1, 2, 3])
    rig.stepper.step()
    slot = rig.scheduler.slots[0]
    rig.scheduler.release(rig.scheduler.active[0])
    slot.cut_to(3, rig.model)  # the reply goes; the prompt and its logits stay
    repeat = rig.admit([1, 2, 3])
    assert not repeat.prefilling
    rig.stepper.sample_repeat(repeat, slot)
    assert len(rig.model.decoded) == 1 and repeat.next_token == 4
    assert rig.text(repeat) == "<4>"


def test_images_are_evaluated_for_prefilling_tasks_and_a_failed_one_fails_only_its_task():
    vision = FakeVision()
    rig = make_rig(n_slots=3, vision=vision)
    generating = rig.admit([1], slot=0)
    rig.stepper.step()
    vision.calls.clear()
    ok = rig.admit([2, 3], slot=1)
    bad = rig.admit([4, 5], slot=2)
    vision.fails = {bad.id}
    rig.stepper.step()
    assert vision.calls == [ok.id, bad.id]  # not the task that is generating
    end = rig.end(bad)
    assert isinstance(end, Failed) and (end.status, end.code) == (503, "unavailable")
    assert "could not evaluate the image" in end.message
    assert rig.scheduler.slots[2].idle and not rig.scheduler.slots[2].cache
    assert generating.next_token == 3 and ok.next_token == 4  # the step went on without it
    rig.assert_consistent()


# --- logprobs ----------------------------------------------------------------------------------


class Pieces:
    def token_to_piece(self, token: int) -> bytes:
        return f"t{token}".encode()


rows = arrays(np.float32, st.integers(2, 40), elements=st.floats(-30, 30, width=32))


@given(rows, st.data())
def test_token_logprob_is_the_log_softmax_and_top_is_the_best_n_in_order(row, data):
    token = data.draw(st.integers(0, len(row) - 1))
    n_top = data.draw(st.integers(0, len(row) - 1))
    lp = token_logprob(Pieces(), row, token, n_top)
    expected = row.astype(np.float64) - np.logaddexp.reduce(row.astype(np.float64))
    assert lp.logprob == pytest.approx(expected[token], abs=1e-9)
    assert (lp.token, lp.bytes) == (f"t{token}", list(f"t{token}".encode()))
    assert len(lp.top) == n_top
    values = [v for _, v, _ in lp.top]
    assert values == sorted(values, reverse=True)
    assert values == pytest.approx(sorted(expected, reverse=True)[:n_top], abs=1e-9)
    for text, value, _ in lp.top:
        assert value == pytest.approx(expected[int(text[1:])], abs=1e-9)


# --- the real model ----------------------------------------------------------------------------


@pytest.fixture
def real(model_path: str) -> Iterator[tuple[Model, Scheduler, Stepper]]:
    model = Model(EngineConfig(model_path=model_path, n_ctx=512, n_parallel=1))
    model.compute.claim()
    scheduler = Scheduler(1, similarity=0.1)
    reuse = PrefixReuse(model, scheduler, HostCache(1 << 26))
    stepper = make_stepper(model, scheduler, reuse, 256)
    try:
        yield model, scheduler, stepper
    finally:
        stepper.close()
        model.close()


def test_steps_of_the_real_model_leave_the_kv_holding_exactly_the_slots_cache(
    real: tuple[Model, Scheduler, Stepper],
):
    model, scheduler, stepper = real
    stepper.warmup()
    assert model.seq_pos_max(0) == -1  # the warm-up leaves nothing behind
    events: list[Event] = []
    prompt = model.tokenize("Once upon a time")
    t = Task(
        GenerationRequest(TokenSequence(prompt), max_tokens=4, ignore_eos=True), events.append, True
    )
    slot = scheduler.slots[0]
    sampler = Sampler(SamplingParams(temperature=0.0), model.n_vocab, model.n_ctx, model.vocab)
    t.start(slot.id, PrefixMatch(), sampler)
    scheduler.bind(t, slot)
    t.on_close = lambda: scheduler.release(t)
    while not t.done:
        stepper.step()
    assert isinstance(events[-1], Finished) and events[-1].finish_reason == "length"
    # The last of the 4 tokens is sampled but never decoded.
    assert len(slot.cache) == len(prompt) + 3 and model.seq_pos_max(0) == len(slot.cache) - 1
