"""Requests of OpenAI's two completion endpoints: /v1/chat/completions (messages, with
logprobs, `rag` and tool calling) and the legacy /v1/completions (a prompt), each on the fields
every generation route shares (app/api/schemas.py: GenerationFields).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, ValidationInfo, field_validator

from app.api.schemas import GenerationFields, RagOptions
from app.api.tool_schemas import ToolChoice, ToolDef, forced_tools, tool_specs
from app.chat.messages import ChatMessage
from app.chat.templates.prompter import PromptEnd
from app.chat.tools import ToolSpec


class ChatCompletionRequest(GenerationFields):
    messages: list[ChatMessage] = Field(min_length=1)
    # Conversation key for slot affinity (also the X-Session-Id header), for clients that send
    # the whole history each turn.
    session_id: str | None = Field(default=None, max_length=128)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    rag: RagOptions | None = None  # answer from these collections' documents
    tools: list[ToolDef] | None = Field(default=None, max_length=128)  # type: ignore[assignment]
    tool_choice: ToolChoice | None = None  # None: "auto" with tools, else "none"
    parallel_tool_calls: bool = True
    takes_tools: ClassVar[bool] = True
    # Choices, each a generation of its own from the same prompt (llama-server's n).
    n: int = Field(default=1, ge=1, le=16)
    # llama-server's (and vLLM's) prompt ending: a last assistant message is continued.
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    # llama-server's `__verbose` (the prompt and the native reply) on the reply; unset: with
    # --verbose.
    verbose: bool | None = None

    @field_validator("messages")
    @classmethod
    def _one_assistant_at_the_end(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        # llama-server's rules and words: one assistant message at the end is a reply to go on
        # from; two in a row there are a mistake, and so is going on from tool calls.
        if len(messages) >= 2 and all(m.role == "assistant" for m in messages[-2:]):
            raise ValueError("Cannot have 2 or more assistant messages at the end of the list.")
        if messages[-1].role == "assistant" and messages[-1].tool_calls:
            raise ValueError("Cannot continue an assistant message that contains tool calls.")
        return messages

    @field_validator("continue_final_message")
    @classmethod
    def _one_ending(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("add_generation_prompt", True):
            raise ValueError(
                "Cannot set both add_generation_prompt and continue_final_message to true."
            )
        return v

    def _continued(self) -> ChatMessage | None:
        last = self.messages[-1]
        return last if last.role == "assistant" else None

    def prompt_end(self) -> tuple[list[ChatMessage], PromptEnd]:
        """The messages the template renders and how the prompt ends: a last assistant message
        is a reply to go on from (llama-server's prefill), its text parts joined by a blank
        line, after the generation prompt."""
        continued = self._continued()
        if continued is None:
            return self.messages, PromptEnd(self.add_generation_prompt)
        return self.messages[:-1], PromptEnd(True, continued.text("\n\n"))

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
