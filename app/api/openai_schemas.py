"""Requests of OpenAI's two completion endpoints: /v1/chat/completions (messages, with
logprobs, `rag` and tool calling) and the legacy /v1/completions (a prompt), each on the fields
every generation route shares (app/api/schemas.py: GenerationFields).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from app.api.schemas import GenerationFields, RagOptions
from app.api.tool_schemas import ToolChoice, ToolDef, forced_tools, tool_specs
from app.chat.messages import ChatMessage
from app.chat.tools import ToolSpec


class ChatCompletionRequest(GenerationFields):
    messages: list[ChatMessage] = Field(min_length=1)
    # Conversation key for slot affinity (also the X-Session-Id header), for clients that send
    # the whole history each turn.
    session_id: str | None = Field(default=None, max_length=128)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    rag: RagOptions | None = None  # documents (issue 11)
    tools: list[ToolDef] | None = Field(default=None, max_length=128)  # type: ignore[assignment]
    tool_choice: ToolChoice | None = None  # None: "auto" with tools, else "none"
    parallel_tool_calls: bool = True
    takes_tools: ClassVar[bool] = True

    @field_validator("messages")
    @classmethod
    def _one_assistant_at_the_end(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        # llama-server's rule and words: one assistant message at the end is a reply to go on
        # from; two in a row there are a mistake.
        if len(messages) >= 2 and all(m.role == "assistant" for m in messages[-2:]):
            raise ValueError("Cannot have 2 or more assistant messages at the end of the list.")
        return messages

    def logprobs_n(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    def tool_specs(self) -> list[ToolSpec]:
        return tool_specs(self.tools)

    def calls_allowed(self) -> bool:
        """Whether the reply may hold tool calls (they are looked for in it)."""
        return bool(self.tools) and self.tool_choice != "none"

    def forced_calls(self) -> list[ToolSpec] | None:
        return forced_tools(self.tool_specs(), self.tool_choice)

    def parallel_calls(self) -> bool:
        return self.parallel_tool_calls


class CompletionRequest(GenerationFields):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(default=None, ge=0, le=20)

    def logprobs_n(self) -> int | None:
        return self.logprobs

    def single_prompt(self) -> str | list[int]:
        """One prompt; a list of several prompts is refused (one choice per request)."""
        p = self.prompt
        if isinstance(p, str):
            return p
        if len(p) == 0:
            return []
        if isinstance(p[0], int):
            return p  # type: ignore[return-value]
        if len(p) != 1:
            raise ValueError("only one prompt per request is supported")
        return p[0]  # type: ignore[return-value]
