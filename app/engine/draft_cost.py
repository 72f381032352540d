"""`DraftCost`: what a draft token costs against what an accepted one saves, measured.

A step's time grows with the tokens it carries: on a GPU a few more barely count, on this
kind of CPU each costs about half a token's step. Speculation pays only where a draft token's
chance of being accepted beats that ratio, so the engine measures it from its own decodes
(time of a step ~ tau per generating slot + m per draft token, when nothing else rides along)
instead of assuming it.

Engine thread only.
"""

from __future__ import annotations

from dataclasses import dataclass

PRIOR_RATIO = 0.5  # m / tau before anything is measured (a CPU's; a GPU's is far lower)
WEIGHT = 0.1  # of each new measurement in the moving averages


@dataclass(slots=True)
class DraftCost:
    tau: float | None = None  # seconds per generating slot in a step without drafts
    m: float | None = None  # seconds per draft token on top of that
    fixed: float | None = None  # the ratio, when given rather than measured (--spec-draft-cost)

    def observe(self, n_decoding: int, n_draft: int, seconds: float) -> None:
        """A step of `n_decoding` generating slots' tokens and `n_draft` draft tokens, and no
        prompt tokens, took `seconds`."""
        if n_decoding <= 0:
            return
        if n_draft == 0:
            self.tau = _mix(self.tau, seconds / n_decoding)
        elif self.tau is not None:
            self.m = _mix(self.m, max(seconds - self.tau * n_decoding, 0.0) / n_draft)

    @property
    def ratio(self) -> float:
        """A draft token's cost in generated tokens' worth: it pays when the chance of its
        acceptance is higher."""
        if self.fixed is not None:
            return self.fixed
        if self.tau is None or self.m is None or self.tau <= 0:
            return PRIOR_RATIO
        return self.m / self.tau


def _mix(old: float | None, new: float) -> float:
    return new if old is None else (1 - WEIGHT) * old + WEIGHT * new
