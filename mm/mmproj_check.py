"""Checks a multimodal projector GGUF before llama.cpp loads it.

clip.cpp reads metadata with typed getters that abort the whole process (GGML_ASSERT) when a
value has another type than expected, and an "mlp" projector missing one of its tensors
segfaults: a bad --mmproj file must be refused with a message, not crash the server. Only what
is known to crash is checked; the rest is left to llama.cpp, which fails cleanly on it.
"""

from __future__ import annotations

import re

from gguf import GGUFReader, GGUFValueType

U32, F32, BOOL, STR = (
    GGUFValueType.UINT32,
    GGUFValueType.FLOAT32,
    GGUFValueType.BOOL,
    GGUFValueType.STRING,
)
# Key patterns of clip-impl.h and the type clip.cpp's getter for each demands.
_TYPES: list[tuple[re.Pattern[str], GGUFValueType]] = [
    (re.compile(p), t)
    for p, t in [
        (r"clip\.(vision|audio)\.(embedding_length|feed_forward_length|block_count)$", U32),
        (r"clip\.(vision|audio)\.projection_dim$", U32),
        (r"clip\.(vision|audio)\.attention\.(head_count|head_count_kv|head_dim)$", U32),
        (r"clip\.(vision|audio)\.attention\.layer_norm_epsilon$", F32),
        (r"clip\.vision\.(image_size|patch_size|image_min_pixels|image_max_pixels)$", U32),
        (r"clip\.vision\.(preproc_min_tiles|preproc_max_tiles|preproc_image_size)$", U32),
        (r"clip\.vision\.(spatial_merge_size|expert_used_count|projector\.scale_factor)$", U32),
        (r"clip\.has_(vision|audio|gen_audio)_encoder$", BOOL),
        (r"clip\.use_(gelu|silu)$", BOOL),
        (r"clip\.((vision|audio)\.)?projector_type$", STR),
    ]
]
_ARRAYS_F32 = re.compile(r"clip\.vision\.image_(mean|std)$")
# Tensors an "mlp" (LLaVA-style) projector dereferences without a check.
_MLP_TENSORS = ("mm.0.weight", "mm.0.bias", "mm.2.weight", "mm.2.bias")


class MmprojError(ValueError):
    """The file is not a projector this server can load; the message says what is wrong."""


def check_mmproj(path: str) -> None:
    try:
        reader = GGUFReader(path)
    except (OSError, ValueError) as e:
        raise MmprojError(f"{path} is not a readable GGUF file: {e}") from None
    problems = []
    projector = None
    for name, field in reader.fields.items():
        kind = field.types[0] if field.types else None
        if _ARRAYS_F32.match(name):
            if kind != GGUFValueType.ARRAY or field.types[-1] != F32:
                problems.append(f"{name} must be an array of float32")
            continue
        for pattern, wanted in _TYPES:
            if pattern.match(name):
                if kind != wanted:
                    got = kind.name if kind is not None else "nothing"
                    problems.append(f"{name} must be {wanted.name}, not {got}")
                elif name == "clip.projector_type":
                    projector = bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
                break
    if projector == "mlp":
        names = {t.name for t in reader.tensors}
        missing = [t for t in _MLP_TENSORS if t not in names]
        if missing:
            problems.append(f"an mlp projector needs tensors {', '.join(missing)}")
    if problems:
        raise MmprojError(f"{path}: " + "; ".join(problems))
