"""A reply in the Responses API's shapes: the `response` object (output items: a message of
`output_text`, `function_call`s; usage with `input_tokens_details.cached_tokens`), or its event
stream (`response.created`, `response.output_item.added`, `response.output_text.delta`, ...,
`response.completed`), each event numbered (`sequence_number`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import JSONResponse

from app.api.errors import error_response
from app.api.event_writer import sse
from app.api.llama_server.native_completion import prompt_progress
from app.api.openai.tool_reply import held_back
from app.chat.tools import ReplyParser, ToolCall
from app.engine.events import Failed, Finished, TextDelta


@dataclass(slots=True)
class ResponseHead:
    """What every object of one response carries."""

    id: str
    model: str
    previous_response_id: str | None = None
    instructions: str | None = None
    echo: dict[str, Any] = field(default_factory=dict)  # request fields sent back as given
    created_at: int = field(default_factory=lambda: int(time.time()))
    # llama-server's telemetry in a stream: timings on each text delta, the prompt's progress.
    timings_per_token: bool = False
    return_progress: bool = False


def response_usage(prompt: int, cached: int, completion: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def message_item(head: ResponseHead, text: str, status: str = "completed") -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "type": "message",
        "id": "msg_" + head.id.removeprefix("resp_")[-24:],
        "status": status,
        "role": "assistant",
        "content": [part] if status == "completed" else [],
    }


def call_item(call: ToolCall, arguments: str | None = None) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call.id.removeprefix("call_"),
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments if arguments is None else arguments,
        "status": "completed" if arguments is None else "in_progress",
    }


def response_object(
    head: ResponseHead,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    reason: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """status: in_progress | completed | incomplete | failed | cancelled."""
    return {
        "id": head.id,
        "object": "response",
        "created_at": head.created_at,
        "status": status,
        "model": head.model,
        "output": output,
        "usage": usage,
        "error": error,
        "incomplete_details": {"reason": reason} if reason else None,
        "previous_response_id": head.previous_response_id,
        "instructions": head.instructions,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "metadata": {},
        **head.echo,
    }


def outcome(finish_reason: str | None) -> tuple[str, str | None]:
    """(status, incomplete reason) of a generation's end."""
    if finish_reason == "length":
        return "incomplete", "max_output_tokens"
    if finish_reason == "cancelled" or finish_reason is None:
        return "cancelled", None
    return "completed", None


class ResponsesWriter:
    def __init__(self, head: ResponseHead, parser: ReplyParser) -> None:
        self.head = head
        self.parser = parser  # shared with the stored reply: the same call ids
        self.seq = 0
        self.text_so_far = ""
        self.sent = 0  # characters of it sent as output_text
        self.opened = False  # the message item has been announced
        self.progressed = False  # the prompt_progress event went out
        self.timings: dict[str, Any] | None = None  # the latest, for the next text delta

    def _event(self, kind: str, **data: Any) -> str:
        event = {"type": kind, "sequence_number": self.seq, **data}
        self.seq += 1
        return sse(event, kind)

    def _whole(self, done: Finished, text: str) -> dict[str, Any]:
        content, calls = self.parser.parse(text)
        output = [message_item(self.head, content)] if content or not calls else []
        output += [call_item(c) for c in calls]
        status, reason = outcome(done.finish_reason)
        usage = response_usage(done.prompt_tokens, done.cached_tokens, done.completion_tokens)
        return response_object(self.head, status, output, usage, reason)

    def start(self) -> Iterable[str]:
        empty = response_object(self.head, "in_progress", [], None)
        yield self._event("response.created", response=empty)
        yield self._event("response.in_progress", response=empty)

    def _open(self) -> Iterable[str]:
        if not self.opened:
            self.opened = True
            item = message_item(self.head, "", "in_progress")
            yield self._event("response.output_item.added", output_index=0, item=item)
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
            yield self._event("response.content_part.added", **where, part=part)

    def _delta(self, text: str) -> Iterable[str]:
        yield from self._open()
        item_id = message_item(self.head, "")["id"]
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        timings = {"timings": self.timings} if self.timings is not None else {}
        yield self._event("response.output_text.delta", **where, delta=text, logprobs=[], **timings)

    def text(self, event: TextDelta) -> Iterable[str]:
        head = self.head
        if event.timings is not None and head.return_progress and not self.progressed:
            self.progressed = True
            empty = response_object(head, "in_progress", [], None)
            progress = prompt_progress(event.timings)
            yield self._event("response.in_progress", response=empty, prompt_progress=progress)
        if event.timings is not None and head.timings_per_token:
            self.timings = event.timings.as_dict()
        self.text_so_far += event.text
        known = self.parser.known
        upto = held_back(self.text_so_far) if known else len(self.text_so_far)
        if upto > self.sent:
            yield from self._delta(self.text_so_far[self.sent : upto])
            self.sent = upto

    def end(self, done: Finished, text: str) -> Iterable[str]:
        whole = self._whole(done, text)
        content, calls = self.parser.parse(text)
        if len(content) > self.sent:
            yield from self._delta(content[self.sent :])
        index = 0
        if content or not calls:
            yield from self._open()
            item = message_item(self.head, content)
            where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
            yield self._event("response.output_text.done", **where, text=content, logprobs=[])
            yield self._event("response.content_part.done", **where, part=item["content"][0])
            yield self._event("response.output_item.done", output_index=0, item=item)
            index = 1
        for i, call in enumerate(calls, start=index):
            item = call_item(call, "")
            yield self._event("response.output_item.added", output_index=i, item=item)
            where = {"item_id": item["id"], "output_index": i}
            yield self._event(
                "response.function_call_arguments.delta", **where, delta=call.arguments
            )
            yield self._event(
                "response.function_call_arguments.done", **where, arguments=call.arguments
            )
            yield self._event("response.output_item.done", output_index=i, item=call_item(call))
        kind = "response.incomplete" if whole["status"] == "incomplete" else "response.completed"
        yield self._event(kind, response=whole, timings=done.timings.as_dict())

    def fail(self, failed: Failed) -> Iterable[str]:
        error = {"code": failed.code, "message": failed.message}
        failed_response = response_object(self.head, "failed", [], None, error=error)
        yield self._event("response.failed", response=failed_response)

    def whole(self, done: Finished, text: str) -> dict[str, Any]:
        return self._whole(done, text)

    def error(self, failed: Failed) -> JSONResponse:
        return error_response(failed.message, failed.status, code=failed.code)
