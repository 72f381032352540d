"""`EventWriter`: how a route whose reply is not a plain OpenAI chat or text completion (tool
calls, Anthropic Messages, the Responses API) writes an engine stream, streamed and not.

The responder (app/api/responder.py) drives it: it owns the engine stream, the client's going
away and the end hooks; the writer only turns events into that API's objects and SSE frames.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from fastapi.responses import JSONResponse

from app.engine.events import Failed, Finished, TextDelta


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    """One server-sent event; `event`: its name (Anthropic's and the Responses API's streams
    name every event)."""
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {body}\n\n"


class EventWriter(Protocol):
    def start(self) -> Iterable[str]:
        """Frames sent before any text."""
        ...

    def text(self, event: TextDelta) -> Iterable[str]:
        """Frames for generated text (none while it is held back, e.g. a tool call)."""
        ...

    def end(self, done: Finished, text: str) -> Iterable[str]:
        """The last frames; `text`: the whole reply."""
        ...

    def fail(self, failed: Failed) -> Iterable[str]:
        """The frames of an error after the stream began."""
        ...

    def whole(self, done: Finished, text: str) -> dict[str, Any]:
        """The unstreamed reply."""
        ...

    def error(self, failed: Failed) -> JSONResponse:
        """The unstreamed error, in this API's shape."""
        ...


@runtime_checkable
class KeepsDeltas(Protocol):
    """A writer whose unstreamed reply needs more than the whole text (the tokens, their
    probabilities): it is handed each delta as it comes."""

    def keep(self, event: TextDelta) -> None: ...
