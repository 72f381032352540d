"""State shifts on the host: synthetic states for the format's invariants (hypothesis), and the
packaged models' real states against llama.cpp's own shift."""

from __future__ import annotations

import struct

import llama_cpp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.engine_config import EngineConfig
from app.engine.kv.state_shift import F16, Rope, StateShift, _same_keys, rope_of, shift_state
from app.engine.llama.model import Model
from tests.app.engine.kv.test_sliding_window import gemma_path  # noqa: F401 (fixture)

HEAD_DIM, N_HEADS, N_LAYERS = 8, 2, 2
ROPE = Rope(llama_cpp.LLAMA_ROPE_TYPE_NORM, HEAD_DIM, HEAD_DIM, 10000.0, 1.0)


def state(
    positions: list[int], v_trans: bool, seed: int = 0, k_type: int = F16
) -> tuple[bytes, list[np.ndarray], list[np.ndarray]]:
    """A one-stream sequence state as llama.cpp writes it; its keys and values per layer."""
    rnd = np.random.default_rng(seed)
    n, row = len(positions), N_HEADS * HEAD_DIM
    out = [struct.pack("<IiII", 0x67677371, 3, 1, n)]
    out += [struct.pack("<iIi", p, 1, 3) for p in positions]
    out.append(struct.pack("<II", int(v_trans), N_LAYERS))
    keys = [rnd.standard_normal((n, row)).astype(np.float16) for _ in range(N_LAYERS)]
    values = [rnd.integers(0, 256, (n, row * 2), dtype=np.uint8) for _ in range(N_LAYERS)]
    for k in keys:
        out += [struct.pack("<iQ", k_type, row * 2), k.tobytes()]
    for v in values:
        if v_trans:  # columns: element j of every cell, then element j + 1 ...
            cols = v.reshape(n, row, 2).transpose(1, 0, 2)
            out += [struct.pack("<iII", F16, 2, row), np.ascontiguousarray(cols).tobytes()]
        else:
            out += [struct.pack("<iQ", F16, row * 2), v.tobytes()]
    return b"".join(out), keys, values


def parse(data: bytes, v_trans: bool) -> tuple[list[int], list[np.ndarray], list[np.ndarray]]:
    n = struct.unpack_from("<I", data, 12)[0]
    positions = [struct.unpack_from("<i", data, 16 + 12 * i)[0] for i in range(n)]
    off, row = 16 + 12 * n + 8, N_HEADS * HEAD_DIM
    keys, values = [], []
    for _ in range(N_LAYERS):
        off += 12
        keys.append(np.frombuffer(data, np.float16, n * row, off).reshape(n, row))
        off += n * row * 2
    for _ in range(N_LAYERS):
        off += 12
        raw = np.frombuffer(data, np.uint8, n * row * 2, off)
        off += n * row * 2
        cells = raw.reshape(row, n, 2).transpose(1, 0, 2) if v_trans else raw
        values.append(cells.reshape(n, -1))
    assert off == len(data)
    return positions, keys, values


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 12),
    p0=st.integers(0, 14),
    length=st.integers(0, 14),
    delta=st.integers(-5, 400),
    v_trans=st.booleans(),
)
def test_the_cells_in_range_move_by_delta_with_their_values(n, p0, length, delta, v_trans):
    positions = list(range(5, 5 + n))
    data, keys, values = state(positions, v_trans)
    moved = shift_state(data, ROPE, p0, p0 + length, delta)
    keep = [i for i, p in enumerate(positions) if p0 <= p < p0 + length]
    if not keep:
        assert moved is None
        return
    got_positions, got_keys, got_values = parse(moved, v_trans)
    assert got_positions == [positions[i] + delta for i in keep]
    for layer in range(N_LAYERS):
        assert (got_values[layer] == values[layer][keep]).all()
        back = ROPE.rotate(got_keys[layer], -delta).astype(np.float32)
        assert np.allclose(back, keys[layer][keep].astype(np.float32), atol=0.02)


def test_a_shift_by_zero_changes_no_key():
    data, keys, _ = state([0, 1, 2], False)
    _, got, _ = parse(shift_state(data, ROPE, 0, 3, 0), False)
    assert all((g == k).all() for g, k in zip(got, keys, strict=True))


def test_a_state_this_file_does_not_know_is_left_to_llama_cpp():
    data, _, _ = state([0, 1, 2], False)
    assert shift_state(data[:-1], ROPE, 0, 3, 4) is None  # cut short
    assert shift_state(data + data, ROPE, 0, 3, 4) is None  # two caches (sliding window)
    quantized, _, _ = state([0, 1, 2], False, k_type=8)  # GGML_TYPE_Q8_0 keys
    assert shift_state(quantized, ROPE, 0, 3, 4) is None
    shared = bytearray(data)
    struct.pack_into("<I", shared, 16 + 4, 2)  # the first cell in two sequences
    assert shift_state(bytes(shared), ROPE, 0, 3, 4) is None


def small_model(path: str, flash_attn: str = "auto") -> Model:
    return Model(EngineConfig(model_path=path, n_ctx=512, n_parallel=1, flash_attn=flash_attn))


@pytest.mark.parametrize("flash_attn", ["on", "off"])  # off: the values are stored in columns
def test_the_packaged_model_moves_as_llama_cpp_does(model_path, flash_attn):
    model = small_model(model_path, flash_attn)
    try:
        shifter = StateShift(model)
        assert shifter.rope is not None and shifter.check()
        assert model.seq_pos_max(model.scratch_seq) == -1  # the check leaves it empty
    finally:
        model.close()


def test_the_check_finds_another_rotation_wrong(model_path):
    model = small_model(model_path)
    try:
        shifter = StateShift(model)
        right = shifter.rope
        assert right is not None
        shifter.rope = Rope(right.mode, right.n_rot, right.head_dim, right.freq_base * 2, 1.0)
        assert not shifter.check()
        assert shifter.shift(b"", 0, 1, 1) is None  # never used after
    finally:
        model.close()


def test_a_sliding_window_model_is_left_to_llama_cpp(gemma_path):  # noqa: F811
    model = Model(EngineConfig(model_path=gemma_path, n_ctx=512, n_parallel=1, swa_full=True))
    try:
        assert rope_of(model) is None and not StateShift(model).check()
        seq = model.scratch_seq
        batch = model.new_batch()
        batch.add_run([2, 100, 101, 102], 0, seq)
        assert model.decode(batch) == 0
        batch.close()
        any_rope = Rope(llama_cpp.LLAMA_ROPE_TYPE_NEOX, 256, 256, 10000.0, 1.0)
        assert shift_state(model.state_save(seq), any_rope, 0, 4, 5) is None  # two caches
    finally:
        model.close()


def test_same_keys_compares_the_keys():
    data, _, _ = state([0, 1, 2], False)
    assert _same_keys(data, data)
    other, _, _ = state([0, 1, 2], False, seed=1)
    assert not _same_keys(data, other)
