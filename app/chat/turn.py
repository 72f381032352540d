"""`TurnRecorder`: what one generation produced, gathered from its events as they pass.

The responder streams events to the client and feeds them here; at the end, `result()` says
what to record (the session's reply message, metrics, the request log line).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.engine.events import Event, Failed, Finished, TextDelta


@dataclass(slots=True)
class TurnResult:
    text: str
    tokens: list[int]  # generated ids whose text is `text`, unless a stop string cut it
    finished: Finished | None = None
    failed: Failed | None = None
    ttft_s: float | None = None  # submission -> first text
    e2e_s: float = 0.0

    @property
    def status(self) -> str:
        """complete | cancelled | error: how the turn is stored and counted."""
        if self.failed is not None:
            return "error"
        if self.finished is None or self.finished.finish_reason == "cancelled":
            return "cancelled"
        return "complete"


@dataclass(slots=True)
class TurnRecorder:
    started: float = field(default_factory=time.perf_counter)
    parts: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    finished: Finished | None = None
    failed: Failed | None = None
    t_first: float | None = None

    def add(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if self.t_first is None:
                self.t_first = time.perf_counter()
            self.parts.append(event.text)
            self.tokens.extend(event.tokens)
        elif isinstance(event, Finished):
            self.finished = event
        elif isinstance(event, Failed):
            self.failed = event

    @property
    def ended(self) -> bool:
        return self.finished is not None or self.failed is not None

    def result(self) -> TurnResult:
        ttft = None if self.t_first is None else self.t_first - self.started
        if self.finished is not None and self.finished.timings.ttft_ms is not None:
            # The engine's own figure: an unstreamed request's text arrives only with its end.
            ttft = self.finished.timings.ttft_ms / 1000.0
        return TurnResult(
            "".join(self.parts),
            list(self.tokens),
            self.finished,
            self.failed,
            ttft,
            time.perf_counter() - self.started,
        )
