"""`DraftState`: one request's speculation state (app/engine/speculator.py), kept on its Task."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.ngram_index import NgramIndex

PRIOR_ACCEPTANCE = 0.75  # a draft token's chance of acceptance before a slot has drafted


@dataclass(slots=True)
class DraftState:
    """One request's speculation: its context, its adapted draft length, its record."""

    context: NgramIndex
    replies: list[NgramIndex] = field(default_factory=list)
    n_synced: int = 0  # generated tokens already in `context`
    acceptance: float = PRIOR_ACCEPTANCE  # moving estimate of a draft token's acceptance
