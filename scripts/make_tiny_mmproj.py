#!/usr/bin/env python3
"""Write a tiny LLaVA-style mmproj GGUF with random weights, for tests (no download needed).

    python scripts/make_tiny_mmproj.py OUT [--seed N] [--n-embd 576]

The file follows what llama.cpp's `tools/mtmd/clip.cpp` (the copy vendored by llama-cpp-python
0.3.36) reads for projector type "mlp":

* a ViT over 64x64 px images cut into 8x8 px patches: 8 * 8 = 64 patches, and the "mlp"
  projector keeps one output token per patch, so every image gives 64 tokens and, for a
  non-M-RoPE text model, 64 KV positions;
* `--n-embd` must equal the text model's input embedding width (`llama_model_n_embd_inp`):
  mtmd_init_from_file refuses a projector whose output width (mm.2.weight ne[1]) differs.
  SmolLM2-135M has 576.

Every metadata value has the exact GGUF type clip.cpp asks for: gguf_get_val_u32/f32/bool/str
GGML_ASSERT the stored type, so e.g. an INT32 where UINT32 is expected kills the process
instead of failing the load. That is why each key is written with an explicit type below and
never through GGUFWriter's type inference (which maps Python int to INT32).

Same seed and width -> byte-identical file (numpy's seeded generator, fixed tensor order).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

try:
    import numpy as np
    from gguf import GGUFValueType, GGUFWriter
except ImportError:  # run with a Python outside the project's venv: use the venv's
    _VENV_PYTHON = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"
    if _VENV_PYTHON.is_file() and Path(sys.executable).absolute() != _VENV_PYTHON:
        os.execv(_VENV_PYTHON, [str(_VENV_PYTHON), __file__, *sys.argv[1:]])
    sys.exit("make_tiny_mmproj.py needs numpy and gguf: run `make install` first")

DESCRIPTION = "Write a tiny LLaVA-style mmproj GGUF with random weights, for tests."
IMAGE_SIZE = 64  # px; clip's "fixed size" preprocessor resizes every image to this square
PATCH_SIZE = 8  # px; IMAGE_SIZE must be a multiple (square grid, llava graph asserts it)
N_PATCHES = (IMAGE_SIZE // PATCH_SIZE) ** 2  # = tokens per image for the "mlp" projector
VIT_EMBD = 32  # vision hidden width
VIT_HEADS = 2  # head dim 16
VIT_FF = 64  # != VIT_EMBD: clip.cpp swaps ffn up/down when ffn_down ne[0] == n_embd
# The llava graph runs blocks [0, n_layer - 1): the last block is loaded but never evaluated
# (LLaVA feeds the LLM the second-to-last layer). Two blocks -> one transformer layer runs.
VIT_BLOCKS = 2
MM_HIDDEN = 64  # mm.0: VIT_EMBD -> MM_HIDDEN, GELU, mm.2: MM_HIDDEN -> n_embd (keeps it small)
LN_EPS = 1e-5


def _u32(w: GGUFWriter, key: str, value: int) -> None:
    w.add_key_value(key, int(value), GGUFValueType.UINT32)


def _f32(w: GGUFWriter, key: str, value: float) -> None:
    w.add_key_value(key, float(value), GGUFValueType.FLOAT32)


def _bool(w: GGUFWriter, key: str, value: bool) -> None:
    w.add_key_value(key, bool(value), GGUFValueType.BOOL)


def _str(w: GGUFWriter, key: str, value: str) -> None:
    w.add_key_value(key, value, GGUFValueType.STRING)


def _f32_array(w: GGUFWriter, key: str, values: list[float]) -> None:
    # get_arr_f32 checks the element type is FLOAT32 (throws otherwise): say it explicitly.
    w.add_key_value(key, [float(v) for v in values], GGUFValueType.ARRAY, GGUFValueType.FLOAT32)


def tensors(n_embd: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """(name, array) in write order. numpy shape (rows, cols) is ggml ne = [cols, rows], so a
    linear layer W: in -> out is stored as shape (out, in), as in PyTorch."""

    def w(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    out: list[tuple[str, np.ndarray]] = [
        # conv kernel (out_ch, in_ch, kh, kw) -> ne [kw, kh, 3, VIT_EMBD]. Larger scale so the
        # pixels dominate the position embedding: different images give clearly different rows.
        ("v.patch_embd.weight", w(VIT_EMBD, 3, PATCH_SIZE, PATCH_SIZE, scale=0.1)),
        ("v.patch_embd.bias", zeros(VIT_EMBD)),
        # no class embedding: positions are exactly the N_PATCHES patches
        ("v.position_embd.weight", w(N_PATCHES, VIT_EMBD)),
        ("v.pre_ln.weight", ones(VIT_EMBD)),
        ("v.pre_ln.bias", zeros(VIT_EMBD)),
    ]
    for i in range(VIT_BLOCKS):
        p = f"v.blk.{i}"
        out += [
            (f"{p}.ln1.weight", ones(VIT_EMBD)),
            (f"{p}.ln1.bias", zeros(VIT_EMBD)),
            (f"{p}.attn_q.weight", w(VIT_EMBD, VIT_EMBD)),
            (f"{p}.attn_q.bias", zeros(VIT_EMBD)),
            (f"{p}.attn_k.weight", w(VIT_EMBD, VIT_EMBD)),
            (f"{p}.attn_k.bias", zeros(VIT_EMBD)),
            (f"{p}.attn_v.weight", w(VIT_EMBD, VIT_EMBD)),
            (f"{p}.attn_v.bias", zeros(VIT_EMBD)),
            (f"{p}.attn_out.weight", w(VIT_EMBD, VIT_EMBD)),  # required by clip.cpp
            (f"{p}.attn_out.bias", zeros(VIT_EMBD)),
            (f"{p}.ln2.weight", ones(VIT_EMBD)),
            (f"{p}.ln2.bias", zeros(VIT_EMBD)),
            (f"{p}.ffn_up.weight", w(VIT_FF, VIT_EMBD)),  # required
            (f"{p}.ffn_up.bias", zeros(VIT_FF)),
            (f"{p}.ffn_down.weight", w(VIT_EMBD, VIT_FF)),  # required
            (f"{p}.ffn_down.bias", zeros(VIT_EMBD)),
        ]
    # The "mlp" graph adds mm.0.bias and mm.2.bias unconditionally, and clip_n_mmproj_embd
    # dereferences mm.2.weight: all four must exist or the process segfaults.
    out += [
        ("mm.0.weight", w(MM_HIDDEN, VIT_EMBD, scale=0.2)),
        ("mm.0.bias", zeros(MM_HIDDEN)),
        # Output rows come out with std ~0.15, close to SmolLM2's token embeddings (0.14), so the
        # text model sees image rows in its usual range.
        ("mm.2.weight", w(n_embd, MM_HIDDEN, scale=0.025)),
        ("mm.2.bias", zeros(n_embd)),
    ]
    return out


def write(out: Path, seed: int = 0, n_embd: int = 576) -> None:
    if n_embd <= 0:
        raise ValueError(f"n_embd must be positive, got {n_embd}")
    rng = np.random.default_rng(seed)
    out.parent.mkdir(parents=True, exist_ok=True)  # e.g. build/ on a fresh checkout
    writer = GGUFWriter(str(out), arch="clip")
    _str(writer, "general.type", "mmproj")
    _str(writer, "general.name", f"kvchat tiny mmproj (seed {seed})")
    _u32(writer, "general.file_type", 0)  # all F32
    _str(writer, "clip.projector_type", "mlp")
    _bool(writer, "clip.has_vision_encoder", True)
    _bool(writer, "clip.use_gelu", True)  # GELU in the ViT MLP (otherwise quick-GELU)
    _u32(writer, "clip.vision.image_size", IMAGE_SIZE)
    _u32(writer, "clip.vision.patch_size", PATCH_SIZE)
    _u32(writer, "clip.vision.embedding_length", VIT_EMBD)
    _u32(writer, "clip.vision.feed_forward_length", VIT_FF)
    _u32(writer, "clip.vision.block_count", VIT_BLOCKS)
    _u32(writer, "clip.vision.projection_dim", n_embd)
    _u32(writer, "clip.vision.attention.head_count", VIT_HEADS)
    _f32(writer, "clip.vision.attention.layer_norm_epsilon", LN_EPS)
    # Optional to clip.cpp's key reader, but fewer than 3 values each is a load error.
    _f32_array(writer, "clip.vision.image_mean", [0.5, 0.5, 0.5])
    _f32_array(writer, "clip.vision.image_std", [0.5, 0.5, 0.5])
    for name, data in tensors(n_embd, rng):
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("out", type=Path, help="output .gguf path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--n-embd", type=int, default=576, help="text model input width (SmolLM2-135M: 576)"
    )
    args = parser.parse_args(argv)
    write(args.out, seed=args.seed, n_embd=args.n_embd)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
