"""A conversation with tools as plain messages a chat template can render (app/chat/tools.py's
generic format): the tools join the system message, an assistant's calls become its text, and
the tool results that follow a call become one user message of `<tool_response>` blocks."""

from __future__ import annotations

from app.chat.messages import ChatMessage
from app.chat.tools import ToolSpec, calls_text, tool_results_text, with_tools_system


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
