"""A conversation with tools as messages the chat template renders: as they are, with the tools
in OpenAI's shape, for a template that knows tools (its own format); else as plain messages in
app/chat/tools.py's generic format: the tools join the system message, an assistant's calls
become its text, and the tool results that follow a call become one user message of
`<tool_response>` blocks."""

from __future__ import annotations

from typing import Any

from app.chat.messages import ChatMessage
from app.chat.tools import ToolSpec, calls_text, tool_json, tool_results_text, with_tools_system

TemplateTools = list[dict[str, Any]] | None  # what the template's `tools` is given


def prompt_messages(
    messages: list[ChatMessage], tools: list[ToolSpec], knows_tools: bool
) -> tuple[list[ChatMessage], TemplateTools]:
    """The messages to render and the template's tools (None: it is not given them)."""
    if knows_tools:
        return messages, [tool_json(t) for t in tools] or None
    return plain_messages(messages, tools), None


def plain_messages(messages: list[ChatMessage], tools: list[ToolSpec]) -> list[ChatMessage]:
    """`messages` with no tool roles or calls left; unchanged when there is nothing to do."""
    if not tools and not any(m.role == "tool" or m.tool_calls for m in messages):
        return messages
    out: list[ChatMessage] = []
    rest = messages
    if tools:
        if messages and messages[0].role in ("system", "developer"):
            system, rest = messages[0], messages[1:]
            text = with_tools_system(system.text(), tools)
            out.append(ChatMessage(role=system.role, content=text))
        else:
            out.append(ChatMessage(role="system", content=with_tools_system(None, tools)))
    results: list[str] = []
    for m in rest:
        if m.role == "tool":
            results.append(m.text())
            continue
        if results:
            out.append(ChatMessage(role="user", content=tool_results_text(results)))
            results = []
        if m.role == "assistant" and m.tool_calls:
            calls = [(c.function.name, c.function.arguments_text()) for c in m.tool_calls]
            text = m.text() + calls_text(calls)
            out.append(
                ChatMessage(role="assistant", content=text, reasoning_content=m.reasoning_content)
            )
        else:
            out.append(m)
    if results:
        out.append(ChatMessage(role="user", content=tool_results_text(results)))
    return out
