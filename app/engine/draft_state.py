"""`DraftState`: one request's speculation state (app/engine/speculator.py), kept on its Task."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.ngram_index import NgramIndex

FIRST_DRAFT = 8  # tokens a slot's first draft may have (then adapted)


@dataclass(slots=True)
class DraftState:
    """One request's speculation: its context, its adapted draft length, its record."""

    context: NgramIndex
    replies: list[NgramIndex] = field(default_factory=list)
    n_synced: int = 0  # generated tokens already in `context`
    n_draft: int = FIRST_DRAFT
    acceptance: float = 1.0  # moving share of draft tokens accepted
    pause: int = 0  # steps left without drafting
    next_pause: int = 4
