"""`RequestOutcome`: one finished generation request, as metrics and the request log see it.

Kept apart from app/api/metrics.py so the responder can build one without importing prometheus.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.reuse_kinds import CacheSource


@dataclass(slots=True)
class RequestOutcome:
    """How one generation request ended; built by the responder, read by metrics and the log."""

    route: str  # "chat" | "completion" | "session"
    outcome: str  # "complete" | "cancelled" | "error" | "rejected"
    status: int  # HTTP status the client got (200, 400, 503, 504, 500)
    slot: int = -1  # -1: never admitted
    session_id: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_source: CacheSource = CacheSource.NONE
    completion_tokens: int = 0
    ttft_s: float | None = None  # submission -> first token; None when no token came
    e2e_s: float = 0.0
    finish_reason: str | None = None
    draft_tokens: int = 0  # speculative decoding: drafted, and of those accepted
    draft_tokens_accepted: int = 0
    prompt_ms: float = 0.0  # the engine's prompt and generation times (llama-server's timings)
    predicted_ms: float = 0.0
