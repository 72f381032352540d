"""Tool calling in a generic text format (the Hermes/Qwen one): the tools are described in the
system part, a call is written as

    <tool_call>
    {"name": "NAME", "arguments": ARGUMENTS}
    </tool_call>

and tool results go back as a user turn of `<tool_response>` blocks. A plain chat template (one
that knows no tools) renders all of it as text, so any model can take part.

Invariant: an assistant message carrying tool calls renders back to exactly the text the model
wrote, because ARGUMENTS is kept verbatim (the raw JSON text, not a re-serialisation) and the
framing is fixed (with `required` or a named tool the grammar writes it; app/api/tool_grammar.py).
So the turn that sends the results extends the call turn's prompt token for token, like a reply.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "}\n</tool_call>"
SEPARATOR = "\n"  # between two calls of one reply

_HEAD = re.compile(r'<tool_call>\n\{"name": "((?:[^"\\]|\\.)*)", "arguments": ')


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # a JSON schema of the arguments object


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text the model wrote, verbatim


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def call_head(name: str) -> str:
    return CALL_OPEN + '{"name": ' + json.dumps(name) + ', "arguments": '


def call_text(name: str, arguments: str) -> str:
    return call_head(name) + arguments + CALL_CLOSE


def calls_text(calls: list[tuple[str, str]]) -> str:
    """The text of a reply that makes these (name, arguments) calls."""
    return SEPARATOR.join(call_text(name, args) for name, args in calls)


def tool_json(tool: ToolSpec) -> dict[str, Any]:
    """The tool in OpenAI's shape (what a template that knows tools is given)."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def tools_system_text(tools: list[ToolSpec]) -> str:
    lines = [json.dumps(tool_json(t)) for t in tools]
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + "\n".join(lines)
        + "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n"
        + call_text("<function-name>", "<args-json-object>")
    )


def with_tools_system(system: str | None, tools: list[ToolSpec]) -> str:
    text = tools_system_text(tools)
    return f"{system}\n\n{text}" if system else text


def tool_results_text(results: list[str]) -> str:
    """The user turn that carries tool results back, in the order they came."""
    return "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in results)


def parse_calls(text: str, known: set[str]) -> tuple[str, list[ToolCall]]:
    """(content, calls) of a reply: the calls in the generic format to tools in `known`, and
    the text before the first call. Text that is not a well-formed call stays content."""
    calls: list[ToolCall] = []
    first = None
    pos = 0
    decoder = json.JSONDecoder()
    while True:
        m = _HEAD.search(text, pos)
        if m is None:
            break
        name = json.loads(f'"{m.group(1)}"')
        start = m.end()
        try:
            _, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            break
        close = end
        while close < len(text) and text[close] in " \t\n\r":
            close += 1
        args = text[start:close]
        if not text.startswith(CALL_CLOSE, close) or name not in known:
            break
        if not isinstance(json.loads(args), dict):
            break
        if first is None:
            first = m.start()
        calls.append(ToolCall(new_call_id(), name, args))
        pos = close + len(CALL_CLOSE)
    if not calls:
        return text, []
    return text[:first], calls


class ReplyParser:
    """`parse_calls` for one reply, done once: the stored reply and the response sent to the
    client carry the same call ids."""

    def __init__(self, known: set[str]) -> None:
        self.known = known  # the tools' names; empty: no call is looked for
        self._last: tuple[str, tuple[str, list[ToolCall]]] | None = None

    def parse(self, text: str) -> tuple[str, list[ToolCall]]:
        if not self.known:
            return text, []
        if self._last is None or self._last[0] != text:
            self._last = (text, parse_calls(text, self.known))
        return self._last[1]
