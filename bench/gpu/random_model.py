"""A llama-architecture GGUF with a real model's tokenizer and random weights, and a random
embedder beside a real one's configuration.

    python -m bench.gpu.random_model METADATA.gguf OUT.gguf [--shape smollm2-135m|llama-1b|tiny]
                                     [--quantize q4_1|q4_k_m|f16]
    python -m bench.gpu.random_model --embedder DIR     (DIR holds config.json and a tokenizer)

The GPU machine cannot receive the packaged 98 MB model, and a 135M model on a GPU measures
little but overheads; speed does not depend on the weights' values, and every bench row bounds
its output with `max_tokens` (end-of-generation tokens biased away). So the models are made
there: METADATA.gguf (`make gpu-kit`) holds the packaged model's metadata and tokenizer, its
architecture keys are set to the chosen shape, every tensor gets values drawn once (small normal
values, norms at one: nothing overflows), and llama.cpp quantizes the F16 file
(`llama_model_quantize`, through llama-cpp-python, so the same code runs on either machine).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True, slots=True)
class Shape:
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    name: str  # general.name of the result
    size_label: str  # general.size_label: the key of blend's per-model table (sink_default)


SHAPES = {
    # The packaged model's own shape: its metadata names it, so its defaults apply.
    "smollm2-135m": Shape(576, 30, 9, 3, 1536, "SmolLM2 135M (random weights)", "135M"),
    # Llama 3.2 1B's layer shapes with the packaged tokenizer (49,152 tokens, not 128,256).
    "llama-1b": Shape(2048, 16, 32, 8, 8192, "Llama-3.2-1B shape (random weights)", "1B"),
    # The CPU rehearsal's: loads and decodes in milliseconds.
    "tiny": Shape(64, 2, 4, 2, 128, "tiny llama (random weights)", "tiny"),
}
QUANTS = {"f16": None, "q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M"}
CONTEXT = 32768


def copy_metadata(reader, writer, overrides: dict[str, object]) -> None:  # noqa: ANN001
    """Every key/value of `reader` into `writer` (same types), `overrides` replacing values."""
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = overrides.get(name, field.contents())
        sub = field.types[-1] if len(field.types) > 1 else None
        writer.add_key_value(name, value, field.types[0], sub_type=sub)


def shape_overrides(arch: str, shape: Shape) -> dict[str, object]:
    head_dim = shape.n_embd // shape.n_head
    return {
        f"{arch}.embedding_length": shape.n_embd,
        f"{arch}.block_count": shape.n_layer,
        f"{arch}.feed_forward_length": shape.n_ff,
        f"{arch}.attention.head_count": shape.n_head,
        f"{arch}.attention.head_count_kv": shape.n_head_kv,
        f"{arch}.rope.dimension_count": head_dim,
        f"{arch}.context_length": CONTEXT,
        "general.name": shape.name,
        "general.size_label": shape.size_label,
        "general.file_type": 1,  # F16
    }


def tensors(shape: Shape, n_vocab: int) -> dict[str, tuple[int, ...]]:
    """llama's tensors (numpy order: rows, columns), the output tied to the token embedding."""
    e, kv = shape.n_embd, shape.n_head_kv * (shape.n_embd // shape.n_head)
    out: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (n_vocab, e),
        "output_norm.weight": (e,),
    }
    for i in range(shape.n_layer):
        b = f"blk.{i}."
        out |= {
            b + "attn_norm.weight": (e,),
            b + "attn_q.weight": (e, e),
            b + "attn_k.weight": (kv, e),
            b + "attn_v.weight": (kv, e),
            b + "attn_output.weight": (e, e),
            b + "ffn_norm.weight": (e,),
            b + "ffn_gate.weight": (shape.n_ff, e),
            b + "ffn_up.weight": (shape.n_ff, e),
            b + "ffn_down.weight": (e, shape.n_ff),
        }
    return out


def write_f16(metadata: Path, out: Path, shape: Shape, seed: int = 0) -> None:
    import gguf

    reader = gguf.GGUFReader(str(metadata))
    arch = str(reader.fields["general.architecture"].contents())
    if arch != "llama":
        raise ValueError(f"{metadata}: architecture {arch!r}; only llama's tensors are known here")
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].contents())
    writer = gguf.GGUFWriter(str(out), arch=arch)
    copy_metadata(reader, writer, shape_overrides(arch, shape))
    # One block of values, repeated: drawing a billion values would cost more than the check.
    block = np.random.default_rng(seed).normal(0.0, 0.02, 1 << 20).astype(np.float16)
    for name, dims in tensors(shape, n_vocab).items():
        # Norms in F32, as llama.cpp writes them (its CPU kernels take no F16 norm weights).
        values = np.ones(dims, np.float32) if len(dims) == 1 else np.resize(block, dims)
        writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def quantize(src: Path, out: Path, ftype_name: str) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype_name)
    params.nthread = os.cpu_count() or 1
    status = llama_cpp.llama_model_quantize(
        str(src).encode(), str(out).encode(), ctypes.byref(params)
    )
    if status != 0:
        raise RuntimeError(f"llama_model_quantize({src}) returned {status}")


def make(metadata: Path, out: Path, shape: str, quant: str) -> Path:
    if QUANTS[quant] is None:
        write_f16(metadata, out, SHAPES[shape])
        return out
    f16 = out.with_suffix(".f16.gguf")
    write_f16(metadata, f16, SHAPES[shape])
    quantize(f16, out, QUANTS[quant])
    f16.unlink()
    return out


def random_embedder(folder: Path, seed: int = 0) -> Path:
    """Random weights for the configuration in `folder` (a sentence-transformers folder)."""
    import torch
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(folder, local_files_only=True))
    model.save_pretrained(folder)
    return folder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu.random_model")
    p.add_argument("metadata", nargs="?", type=Path)
    p.add_argument("out", nargs="?", type=Path)
    p.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-135m")
    p.add_argument("--quantize", choices=sorted(QUANTS), default="q4_1")
    p.add_argument("--embedder", type=Path, help="give this embedder folder random weights")
    args = p.parse_args(argv)
    if args.embedder:
        print(random_embedder(args.embedder))
        return 0
    if not (args.metadata and args.out):
        p.error("METADATA.gguf and OUT.gguf are needed (or --embedder DIR)")
    print(make(args.metadata, args.out, args.shape, args.quantize))
    return 0


if __name__ == "__main__":
    sys.exit(main())
