"""`DraftState`: one request's speculation state (app/engine/speculation/speculator.py),
kept on its Task."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.speculation.ngram_index import NgramIndex

# A draft's evidence: how far back its source agrees with the end of the context. A source that
# agrees over LONG_MATCH tokens or more (llama-server's `ngram-simple` drafts only on 12) is
# repeating a passage or the reply's own loop, and its tokens are accepted far more often than
# those of a 3-token match; each kind keeps its own estimate.
SHORT, LONG = 0, 1
LONG_MATCH = 12
# A draft token's chance of acceptance before a request has drafted, by evidence.
PRIOR_ACCEPTANCE = (0.75, 0.95)
RECOVER = 0.02  # a draft not worth making moves its estimate this share back to the prior


@dataclass(slots=True)
class DraftState:
    """One request's speculation: its context, its acceptance estimates, its record."""

    context: NgramIndex
    replies: list[NgramIndex] = field(default_factory=list)
    n_synced: int = 0  # generated tokens already in `context`
    # Moving estimates of a draft token's acceptance, by evidence (SHORT, LONG).
    acceptance: list[float] = field(default_factory=lambda: list(PRIOR_ACCEPTANCE))
    last: int = SHORT  # the evidence of the latest draft (what its verification teaches)

    def recover(self, evidence: int) -> None:
        """A draft of this evidence was not worth making: its estimate drifts back towards the
        prior, so that the request tries again now and then."""
        p = self.acceptance[evidence]
        self.acceptance[evidence] = p + RECOVER * (PRIOR_ACCEPTANCE[evidence] - p)
