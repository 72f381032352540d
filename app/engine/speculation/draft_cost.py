"""`DraftCost`: what a draft token costs against what an accepted one saves, measured.

A step's time grows with the tokens it carries: on a GPU a few more barely count, on this
kind of CPU each costs about half a token's step. Speculation pays only where a draft token's
chance of being accepted beats that ratio, so the engine measures it from its own decodes
(time of a step of b generating slots ~ b * tau_b + m per draft token, when nothing else rides
along) instead of assuming it.

tau is kept per batch size b: a step of several slots costs each slot far less than a step of
one, so one figure for all sizes would make a draft look cheap in a busy batch (and the m
measured there, against a one-slot tau, close to nothing). A size not timed yet drafts nothing:
its first step, without drafts, times it.

Engine thread only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PRIOR_RATIO = 0.5  # m / tau before anything is measured (a CPU's; a GPU's is far lower)
WEIGHT = 0.1  # of each new measurement in the moving averages


@dataclass(slots=True)
class DraftCost:
    # Seconds per generating slot in a step of b slots without drafts, by b.
    tau: dict[int, float] = field(default_factory=dict)
    m: float | None = None  # seconds per draft token on top of a step's slots
    fixed: float | None = None  # the ratio, when given rather than measured (--spec-draft-cost)

    def observe(self, n_decoding: int, n_draft: int, seconds: float) -> None:
        """A step of `n_decoding` generating slots' tokens and `n_draft` draft tokens, and no
        prompt tokens, took `seconds`."""
        if n_decoding <= 0:
            return
        tau = self.tau.get(n_decoding)
        if n_draft == 0:
            self.tau[n_decoding] = _mix(tau, seconds / n_decoding)
        elif tau is not None:
            self.m = _mix(self.m, max(seconds - tau * n_decoding, 0.0) / n_draft)

    def ratio(self, n_decoding: int) -> float:
        """A draft token's cost in generated tokens' worth, in a step of `n_decoding`
        generating slots: it pays when the chance of its acceptance is higher."""
        if self.fixed is not None:
            return self.fixed
        tau = self.tau.get(n_decoding)
        if tau is None or tau <= 0:
            return math.inf  # not timed yet: this step goes without drafts and times it
        return PRIOR_RATIO if self.m is None else self.m / tau


def _mix(old: float | None, new: float) -> float:
    return new if old is None else (1 - WEIGHT) * old + WEIGHT * new
