"""Blend's default k (tokens recomputed at the start of each placed chunk), per model, measured.

k trades speed for quality, and the trade differs by model. Where a new combination of
cached chunks places some, their k-token repairs are most of what a blend request computes
beyond its question, one decode per placed chunk; fewer repaired tokens leave more of each
chunk's attention sink computed against the collection's head instead of the real prefix.
`python -m bench.blend_quality` measures what k costs a model (docs/blend.md, Quality): where
a smaller k left the first answer token's distribution and the forced answer steps as they were
at k = 16, that model's default is the smaller one. A model nobody measured gets the k the
model that needed the most repair needed.

A model is known by its GGUF `general.basename` and `general.size_label` (any quantization
of it): the table holds what was measured, not a guess from the architecture.
"""

from __future__ import annotations

from app.engine.model import Model

# (general.basename, general.size_label) -> k. SmolLM2 135M: k = 4 matches k = 16 in KL and
# forced-step agreement; Gemma 3 270M: k = 8 is clearly worse than 16 (docs/blend.md).
MEASURED: dict[tuple[str, str], int] = {
    ("smollm2", "135m"): 4,
    ("gemma-3", "270m"): 16,
}
UNMEASURED = 16  # the most any measured model needed


def default_sink_tokens(basename: str | None, size_label: str | None) -> int:
    """k for a model that `--blend-sink-tokens` (-1: the default) leaves to its measurement."""
    key = ((basename or "").strip().lower(), (size_label or "").strip().lower())
    return MEASURED.get(key, UNMEASURED)


def sink_tokens(requested: int, model: Model) -> int:
    """The k a server uses: the flag's, or (when it is negative) the model's measured default."""
    if requested >= 0:
        return requested
    return default_sink_tokens(model.meta("general.basename"), model.meta("general.size_label"))
