"""`StateShift`: a saved sequence state moved to other positions on the host, RoPE re-applied to
its keys, so that a restored chunk's KV lands at its place in the prompt.

Why: cells moved in llama.cpp (llama_memory_seq_add) are re-roped at the next decode by a pass
over the whole cache (the K-shift), whatever the number of cells moved; a blend request pays it
once (app/engine/blend/chunk_blend.py). Rotating the chunk's keys here instead, before the restore,
leaves nothing to re-rope.

The state is llama.cpp's sequence state (llama_state_seq_get_data) of one KV cache in one stream:
a header, each cell's position and sequence, then every layer's key rows and every layer's value
rows (or, without flash attention, value columns). Only f16 keys and RoPE NORM or NEOX without
scaling are rotated here. Anything else (two caches as with sliding-window models, M-RoPE cells,
a quantized key cache, a format that does not parse to its end) gives None and the caller
shifts in llama.cpp. And before the first shift, `StateShift` checks its rotation against
llama.cpp's own on a few tokens, once; where they disagree it is never used.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import llama_cpp
import numpy as np

from app.engine.llama.model import Model

F16 = 1  # GGML_TYPE_F16
CHECK_TOKENS = 8  # tokens decoded for the check
CHECK_DELTA = 37  # positions they are moved by
TOLERANCE = 1e-2  # of the keys' largest magnitude: f16 rounding, not another rotation


@dataclass(frozen=True, slots=True)
class Rope:
    mode: int  # llama_cpp.LLAMA_ROPE_TYPE_NORM or _NEOX
    n_rot: int  # dimensions of each head that are rotated
    head_dim: int
    freq_base: float
    freq_scale: float

    def rotate(self, keys: np.ndarray, delta: int) -> np.ndarray:
        """f16 key rows (cells x heads * head_dim) moved by `delta` positions."""
        return self.turn(keys, *self.angles(delta))

    def angles(self, delta: int) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin of each rotated pair's angle for a move by `delta` (the same for every
        layer: computed once a shift)."""
        half = self.n_rot // 2
        theta = delta * self.freq_scale * self.freq_base ** (-2.0 * np.arange(half) / self.n_rot)
        return np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)

    def turn(self, keys: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        x = keys.astype(np.float32).reshape(len(keys), -1, self.head_dim)
        if self.mode == llama_cpp.LLAMA_ROPE_TYPE_NORM:  # pairs (2i, 2i + 1)
            first, second = slice(0, self.n_rot, 2), slice(1, self.n_rot, 2)
        else:  # NEOX: pairs (i, i + n_rot / 2)
            first, second = slice(0, self.n_rot // 2), slice(self.n_rot // 2, self.n_rot)
        a, b = x[..., first].copy(), x[..., second]
        x[..., first] = a * cos - b * sin
        x[..., second] = a * sin + b * cos
        return x.reshape(keys.shape).astype(np.float16)


def rope_of(model: Model) -> Rope | None:
    """The model's RoPE, where this file can rotate it (None: it cannot)."""
    mode = model.rope_type
    if mode not in (llama_cpp.LLAMA_ROPE_TYPE_NORM, llama_cpp.LLAMA_ROPE_TYPE_NEOX):
        return None
    arch = model.meta("general.architecture")
    n_head = model.meta(f"{arch}.attention.head_count")
    n_embd = model.meta(f"{arch}.embedding_length")
    if model.n_swa > 0 or not n_head or not n_embd or model.meta(f"{arch}.rope.scaling.type"):
        return None
    head_dim = int(model.meta(f"{arch}.attention.key_length") or int(n_embd) // int(n_head))
    n_rot = int(model.meta(f"{arch}.rope.dimension_count") or head_dim)
    base = float(model.meta(f"{arch}.rope.freq_base") or 10000.0)
    scale = model.rope_freq_scale
    return Rope(mode, n_rot, head_dim, base, scale)


@dataclass(slots=True)
class _State:
    """A sequence state parsed in place (numpy views into its bytes)."""

    magic: int
    seq: int
    meta: np.ndarray  # (cells, 3) int32: position, number of sequences, sequence
    v_trans: int
    keys: list[tuple[int, np.ndarray]]  # per layer: row bytes, f16 rows (cells, row / 2)
    values: list[tuple[bytes, np.ndarray]]  # per layer: header, cells on axis 0 (1: v_trans)

    def cells(self, values: np.ndarray, keep: np.ndarray) -> np.ndarray:
        return values[:, keep] if self.v_trans else values[keep]


def _parse(buf: memoryview | bytes) -> _State | None:
    """The state, where it is one this file knows (one stream, single-sequence cells, f16
    keys, parsed to its end); None otherwise."""
    try:
        return _read(memoryview(buf))
    except (ValueError, struct.error):
        return None


def _read(buf: memoryview) -> _State | None:
    magic, seq, n_stream, n = struct.unpack_from("<IiII", buf, 0)
    off = 16
    if n_stream != 1 or n == 0:
        return None
    meta = np.frombuffer(buf, np.int32, 3 * n, off).reshape(n, 3)
    off += 12 * n
    if (meta[:, 1] != 1).any():
        return None  # cells with more than one sequence, or with extra fields (M-RoPE)
    v_trans, n_layer = struct.unpack_from("<II", buf, off)
    off += 8
    keys = []
    for _ in range(n_layer):  # keys: f16 rows, one per cell
        k_type, row = struct.unpack_from("<iQ", buf, off)
        if k_type != F16:
            return None
        keys.append((row, np.frombuffer(buf, np.float16, n * row // 2, off + 12).reshape(n, -1)))
        off += 12 + n * row
    values = []
    for _ in range(n_layer):  # values: rows, or columns of elements (v_trans)
        header = bytes(buf[off : off + 12])
        if v_trans:
            _, el, n_embd = struct.unpack_from("<iII", buf, off)
            shape, size = (n_embd, n, el), n_embd * n * el
        else:
            row = struct.unpack_from("<Q", buf, off + 4)[0]
            shape, size = (n, row), n * row
        values.append((header, np.frombuffer(buf, np.uint8, size, off + 12).reshape(shape)))
        off += 12 + size
    return _State(magic, seq, meta, v_trans, keys, values) if off == len(buf) else None


def shift_state(data: memoryview | bytes, rope: Rope, p0: int, p1: int, delta: int) -> bytes | None:
    """The state's cells at positions [p0, p1) moved by `delta` (the others left out); None
    where the state is not one this file knows or no cell is in the range."""
    state = _parse(data)
    if state is None:
        return None
    keep = (state.meta[:, 0] >= p0) & (state.meta[:, 0] < p1)
    if not keep.any():
        return None  # llama.cpp writes no layers for an empty state
    kept = state.meta[keep].copy()
    kept[:, 0] += delta
    cos, sin = rope.angles(delta)
    out = [struct.pack("<IiII", state.magic, state.seq, 1, len(kept)), kept.tobytes()]
    out.append(struct.pack("<II", state.v_trans, len(state.keys)))
    for row, rows in state.keys:
        out += [struct.pack("<iQ", F16, row), rope.turn(rows[keep], cos, sin).tobytes()]
    for header, values in state.values:
        out += [header, state.cells(values, keep).tobytes()]
    return b"".join(out)


class StateShift:
    """Chunk states moved on the host, once checked against llama.cpp's shift (engine thread:
    the check decodes in the model's scratch sequence, which must be empty then)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.rope = rope_of(model)
        self._checked: bool | None = None  # None: not yet

    def check(self) -> bool:
        """Whether the rotation agrees with llama.cpp's: checked on the first call (the
        scratch sequence must be empty then), remembered after."""
        if self._checked is None:
            self._checked = self._check()
        return self._checked

    def shift(self, data: memoryview | bytes, p0: int, p1: int, delta: int) -> bytes | None:
        """`shift_state` with the model's RoPE; None where it does not apply or `check` has
        not found it agreeing."""
        if self.rope is None or not self._checked:
            return None
        return shift_state(data, self.rope, p0, p1, delta)

    def _check(self) -> bool:
        """A few tokens' state moved here and by llama.cpp (seq_add, then the next decode
        applies its K-shift): the same keys, to f16 rounding."""
        model, rope, seq = self.model, self.rope, self.model.scratch_seq
        if rope is None or seq is None:
            return False
        batch = model.new_batch()
        try:
            tokens = [model.bos if model.bos >= 0 else 1] + list(range(100, 100 + CHECK_TOKENS))
            n = len(tokens)
            batch.add_run(tokens, 0, seq)
            if model.decode(batch) != 0:
                return False
            ours = shift_state(model.state_save(seq), rope, 0, n, CHECK_DELTA)
            model.seq_shift(seq, 0, n, CHECK_DELTA)
            batch.clear()
            batch.add_run(tokens[:1], n + CHECK_DELTA, seq)  # one more token: the K-shift runs
            if ours is None or model.decode(batch) != 0:
                return False
            model.seq_rm(seq, n + CHECK_DELTA, -1)
            return _same_keys(ours, model.state_save(seq))
        finally:
            batch.close()
            model.seq_clear(seq)


def _same_keys(ours: bytes, theirs: bytes) -> bool:
    """Both states' cells and values agree, and their keys to TOLERANCE of the largest key."""
    a, b = _parse(ours), _parse(theirs)
    if a is None or b is None or a.meta.shape != b.meta.shape or (a.meta != b.meta).any():
        return False
    if len(a.keys) != len(b.keys) or a.v_trans != b.v_trans:
        return False
    for (_, ka), (_, kb) in zip(a.keys, b.keys, strict=True):
        x, y = ka.astype(np.float32), kb.astype(np.float32)
        if float(np.abs(x - y).max()) > TOLERANCE * max(float(np.abs(y).max()), 1e-6):
            return False
    return all(  # values are not touched by a shift
        ha == hb and (va == vb).all() for (ha, va), (hb, vb) in zip(a.values, b.values, strict=True)
    )
