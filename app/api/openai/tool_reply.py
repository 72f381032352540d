"""A chat completion that may call tools, in OpenAI's shapes: `message.tool_calls` and
`finish_reason: "tool_calls"`, or streamed `tool_calls` deltas as the OpenAI SDK accumulates them
(the first delta of a call carries its index, id, type and name; the next its arguments).

Text streams as content until a call may begin (`<tool_call>`, or a prefix of it at the end of
what came so far, is held back); what follows is parsed once the reply ends (app/chat/tools.py),
and whatever is not a well-formed call is sent as content after all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi.responses import JSONResponse

from app.api.errors import error_body, error_response
from app.api.event_writer import sse
from app.api.openai.openai_shapes import ChatShape, Envelope, usage
from app.chat.templates.reasoning import ReplySplit, Thinking, split_reasoning
from app.chat.tools import CALL_OPEN, ToolCall, parse_calls
from app.engine.events import Failed, Finished, TextDelta

MARK = CALL_OPEN.rstrip("\n")  # "<tool_call>"


def held_back(text: str) -> int:
    """Where the text that may be (the start of) a call begins: len(text) if none may."""
    found = text.find(MARK)
    if found >= 0:
        return found
    for k in range(min(len(MARK) - 1, len(text)), 0, -1):
        if MARK.startswith(text[-k:]):
            return len(text) - k
    return len(text)


def calls_json(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


class ToolCallWriter:
    def __init__(
        self,
        envelope: Envelope,
        known: set[str],
        include_usage: bool,
        timings: dict[str, Any],
        thinking: Thinking | None = None,
    ) -> None:
        self.envelope = envelope
        self.known = known  # the tools' names: a call to any other is text
        self.include_usage = include_usage
        self.timings = timings  # added to the engine's
        # The reply's thought goes apart first (app/chat/templates/reasoning.py); calls are looked
        # for in the answer only.
        self.thinking = thinking or Thinking("none")
        self.split = ReplySplit(self.thinking)
        self.text_so_far = ""  # of the answer
        self.sent = 0  # characters of it sent as content

    def _chunk(self, delta: dict[str, Any], reason: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}
        return sse(self.envelope.chunk(choice, **extra))

    def start(self) -> Iterable[str]:
        yield self._chunk({"role": "assistant", "content": None})  # as a chat without tools

    def text(self, event: TextDelta) -> Iterable[str]:
        return self._pieces(self.split.feed(event.text))

    def _pieces(self, pieces: list[tuple[str, str]]) -> Iterable[str]:
        for kind, piece in pieces:
            if kind == "reasoning":
                yield self._chunk({"reasoning_content": piece})
                continue
            self.text_so_far += piece
            upto = held_back(self.text_so_far)
            if upto > self.sent:
                yield self._chunk({"content": self.text_so_far[self.sent : upto]})
                self.sent = upto

    def end(self, done: Finished, text: str) -> Iterable[str]:
        yield from self._pieces(self.split.finish())
        content, calls = parse_calls(self.text_so_far, self.known)
        if len(content) > self.sent and content.startswith(self.text_so_far[: self.sent]):
            yield self._chunk({"content": content[self.sent :]})
        for i, c in enumerate(calls):
            named = {"name": c.name, "arguments": ""}
            head = {"index": i, "id": c.id, "type": "function", "function": named}
            yield self._chunk({"tool_calls": [head]})
            args = {"index": i, "function": {"arguments": c.arguments}}
            yield self._chunk({"tool_calls": [args]})
        reason = "tool_calls" if calls else done.finish_reason
        timings = {**done.timings.as_dict(), **self.timings}
        yield self._chunk({}, reason, timings=timings)
        if self.include_usage:
            yield sse(self.envelope.chunk(None, usage=usage(done)))
        yield sse("[DONE]")

    def fail(self, failed: Failed) -> Iterable[str]:
        yield sse(error_body(failed.message, failed.status, code=failed.code))
        yield sse("[DONE]")

    def whole(self, done: Finished, text: str) -> dict[str, Any]:
        reasoning, answer = split_reasoning(text, self.thinking)
        content, calls = parse_calls(answer, self.known)
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = calls_json(calls)
        elif not content:
            message["content"] = ""
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if calls else done.finish_reason,
            "logprobs": None,
        }
        timings = {**done.timings.as_dict(), **self.timings}
        return self.envelope.make(ChatShape.object, [choice], usage=usage(done), timings=timings)

    def error(self, failed: Failed) -> JSONResponse:
        return error_response(failed.message, failed.status, code=failed.code)
