"""A reply in Anthropic's Messages shapes: a `message` object (text and tool_use blocks,
`stop_reason`, `usage` with `cache_read_input_tokens` from our cache), or its event stream
(`message_start`, `content_block_start` / `_delta` / `_stop`, `message_delta`, `message_stop`).

Anthropic counts `input_tokens` apart from the tokens read from the cache: input_tokens +
cache_read_input_tokens is the whole prompt.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from fastapi.responses import JSONResponse

from app.api.anthropic.anthropic_errors import anthropic_error_body, anthropic_error_response
from app.api.event_writer import sse
from app.api.openai.tool_reply import held_back
from app.chat.tools import ToolCall, parse_calls
from app.engine.events import Failed, Finished, TextDelta


def _stop_reason(done: Finished, calls: list[ToolCall]) -> str:
    if calls:
        return "tool_use"
    if done.stop_sequence is not None:
        return "stop_sequence"
    return "max_tokens" if done.finish_reason == "length" else "end_turn"


def _usage(done: Finished) -> dict[str, int]:
    return {
        "input_tokens": done.prompt_tokens - done.cached_tokens,
        "output_tokens": done.completion_tokens,
        "cache_read_input_tokens": done.cached_tokens,
        "cache_creation_input_tokens": 0,
    }


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_" + call.id.removeprefix("call_"), "name": call.name}


class AnthropicWriter:
    def __init__(self, model: str, known: set[str], prompt_tokens: int) -> None:
        self.id = "msg_" + uuid.uuid4().hex[:24]
        self.model = model
        self.known = known  # the tools' names; none: no call is looked for
        self.prompt_tokens = prompt_tokens
        self.text_so_far = ""
        self.sent = 0  # characters of it sent as text
        self.block = -1  # index of the open block (-1: none yet)
        self.text_open = False

    def _message(self, content: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            **more,
        }

    def start(self) -> Iterable[str]:
        usage = {"input_tokens": self.prompt_tokens, "output_tokens": 0}
        message = self._message([], stop_reason=None, stop_sequence=None, usage=usage)
        yield sse({"type": "message_start", "message": message}, "message_start")

    def _open_text(self) -> Iterable[str]:
        if not self.text_open:
            self.block += 1
            self.text_open = True
            start = {"type": "content_block_start", "index": self.block}
            yield sse({**start, "content_block": {"type": "text", "text": ""}}, start["type"])

    def _text(self, text: str) -> Iterable[str]:
        yield from self._open_text()
        delta = {"type": "text_delta", "text": text}
        event = {"type": "content_block_delta", "index": self.block, "delta": delta}
        yield sse(event, "content_block_delta")

    def _stop_block(self) -> Iterable[str]:
        yield sse({"type": "content_block_stop", "index": self.block}, "content_block_stop")

    def text(self, event: TextDelta) -> Iterable[str]:
        self.text_so_far += event.text
        upto = held_back(self.text_so_far) if self.known else len(self.text_so_far)
        if upto > self.sent:
            yield from self._text(self.text_so_far[self.sent : upto])
            self.sent = upto

    def end(self, done: Finished, text: str) -> Iterable[str]:
        content, calls = parse_calls(text, self.known) if self.known else (text, [])
        if len(content) > self.sent:
            yield from self._text(content[self.sent :])
        if not calls:
            yield from self._open_text()  # a message has at least its (maybe empty) text
        if self.text_open:
            yield from self._stop_block()
        for call in calls:
            self.block += 1
            block = {**_tool_use(call), "input": {}}
            start = {"type": "content_block_start", "index": self.block, "content_block": block}
            yield sse(start, "content_block_start")
            delta = {"type": "input_json_delta", "partial_json": call.arguments}
            event = {"type": "content_block_delta", "index": self.block, "delta": delta}
            yield sse(event, "content_block_delta")
            yield from self._stop_block()
        stop = {"stop_reason": _stop_reason(done, calls), "stop_sequence": done.stop_sequence}
        event = {"type": "message_delta", "delta": stop, "usage": _usage(done)}
        yield sse(event, "message_delta")
        yield sse({"type": "message_stop"}, "message_stop")

    def fail(self, failed: Failed) -> Iterable[str]:
        yield sse(anthropic_error_body(failed.message, failed.status), "error")

    def whole(self, done: Finished, text: str) -> dict[str, Any]:
        content, calls = parse_calls(text, self.known) if self.known else (text, [])
        blocks: list[dict[str, Any]] = []
        if content or not calls:
            blocks.append({"type": "text", "text": content})
        for call in calls:
            blocks.append({**_tool_use(call), "input": json.loads(call.arguments)})
        return self._message(
            blocks,
            stop_reason=_stop_reason(done, calls),
            stop_sequence=done.stop_sequence,
            usage=_usage(done),
        )

    def error(self, failed: Failed) -> JSONResponse:
        return anthropic_error_response(failed.message, failed.status)
