"""`DecodeCounts`: what the engine's client steps have cost since start, in llama_decode calls,
as llama-server's /metrics counts them (n_decode_total, n_busy_slots_per_decode and the
speculative verification steps)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class DecodeCounts:
    """Counted on the engine thread by the stepper; read elsewhere as a copy."""

    n_decode: int = 0  # llama_decode calls that carried a client's tokens (not images)
    n_busy_slots: int = 0  # summed over those calls: the client slots each one carried
    n_draft_steps: int = 0  # slot-steps that verified drafted tokens

    def copy(self) -> DecodeCounts:
        return DecodeCounts(self.n_decode, self.n_busy_slots, self.n_draft_steps)

    def count(self, n_slots: int, n_drafting: int) -> None:
        self.n_decode += 1
        self.n_busy_slots += n_slots
        self.n_draft_steps += n_drafting
