"""Blend's quality gate: per model, the k it uses (tokens recomputed at the start of each placed
chunk) and whether blend is on at all, from how often its blended answers were measured to be
full prefill's.

Blend is approximate: a placed chunk's KV was computed after the collection's head, not after
the chunks before it, and only its first k tokens are computed again. `python -m
bench.blend_quality` measures, per model and k, the share of a quality set of document
questions whose 32-token greedy answer is exactly full prefill's (docs/blend.md, "The quality
gate"). A model's default k is the smallest that reaches `BAR`, the share the best k reached on
Gemma 3 270M; where no measured k does (or nothing was measured), blend is off on that model: a
request that asks for it keeps prefix reuse and says why, and `GET /props` says so.
`--blend-force` turns it on anyway (at `FALLBACK_K` unless `--blend-sink-tokens` says), for a
deployment that accepts the difference; the measured agreement goes with each blended reply.

A model is known by its GGUF `general.basename` and `general.size_label` (any quantization of
it): the table holds what was measured, not a guess from the architecture. An explicit
`--blend-sink-tokens` keeps its k and passes where a measured k no larger passes (more
recomputed tokens, closer to full prefill); the agreement reported for a k is that of the
largest measured k no larger than it.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.llama.model import Model

BAR = 0.58  # exact greedy share needed: Gemma 3 270M's at k = 16, 7 of the 12 questions
FALLBACK_K = 16  # k where no measured k passes (forced on): what the passing model needed


@dataclass(frozen=True, slots=True)
class Agreement:
    """Blend against full prefill on the quality set (bench.blend_quality), at one k."""

    k: int
    exact: float  # share of questions whose 32-token greedy answer is full prefill's
    f1: float  # blend's greedy answer against full prefill's, SQuAD token F1, mean
    questions: int = 12

    def as_dict(self) -> dict[str, float | int]:
        return {"k": self.k, "exact_greedy": self.exact, "f1": self.f1, "questions": self.questions}


def _rows(*rows: tuple[int, float, float]) -> dict[int, Agreement]:
    return {k: Agreement(k, exact, f1) for k, exact, f1 in rows}


# (general.basename, general.size_label) -> {k: agreement}: docs/blend.md's table (k, exact,
# F1), 12 questions.
MEASURED: dict[tuple[str, str], dict[int, Agreement]] = {
    ("smollm2", "135m"): _rows(
        (0, 0.0, 0.28),
        (4, 0.0, 0.32),
        (8, 0.0, 0.28),
        (16, 0.0, 0.25),
        (32, 0.0, 0.32),
        (48, 0.0, 0.29),
        (64, 0.0, 0.38),
    ),
    ("gemma-3", "270m"): _rows(
        (0, 0.0, 0.0), (4, 0.0, 0.03), (8, 0.08, 0.08), (16, 0.58, 0.67), (32, 0.83, 0.93)
    ),
}


@dataclass(frozen=True, slots=True)
class BlendGate:
    """What blend does on this model: its k, why it is off (None: on), the agreement measured
    at the largest measured k no larger (None: none measured), and whether --blend-force
    turned it on past the gate."""

    k: int
    refused: str | None = None
    agreement: Agreement | None = None
    forced: bool = False


def gate(basename: str | None, size_label: str | None, requested: int, force: bool) -> BlendGate:
    """The gate of the model named so; `requested`: --blend-sink-tokens (< 0: the default)."""
    key = ((basename or "").strip().lower(), (size_label or "").strip().lower())
    table = MEASURED.get(key, {})
    passing = sorted(k for k, a in table.items() if a.exact >= BAR)
    if requested >= 0:
        k, ok = requested, any(m <= requested for m in passing)
    else:
        k, ok = (passing[0], True) if passing else (FALLBACK_K, False)
    below = [m for m in table if m <= k]
    agreement = table[max(below)] if below else None
    if ok:
        return BlendGate(k, None, agreement)
    if force:
        return BlendGate(k, None, agreement, forced=True)
    return BlendGate(k, _why(table, passing, requested), agreement)


def _why(table: dict[int, Agreement], passing: list[int], requested: int) -> str:
    need = f"needs {BAR:.0%}; --blend-force turns it on"
    if not table:
        return (
            "blend is off for this model: its blended answers were never measured against full "
            f"prefill (python -m bench.blend_quality; {need})"
        )
    if passing:  # an explicit k below the smallest that passes
        return (
            f"blend is off at --blend-sink-tokens {requested} for this model: its blended answers "
            f"match full prefill in {BAR:.0%} of the quality set only from k = {passing[0]} "
            f"(--blend-force turns it on)"
        )
    best = max(a.exact for a in table.values())
    ks = ", ".join(str(k) for k in sorted(table))
    return (
        f"blend is off for this model: its blended answers matched full prefill in {best:.0%} "
        f"of the quality set at best (k = {ks}; {need})"
    )


def model_gate(model: Model, requested: int, force: bool) -> BlendGate:
    """The gate of a loaded model, by its GGUF metadata."""
    basename, size = model.meta("general.basename"), model.meta("general.size_label")
    return gate(basename, size, requested, force)
