"""Anthropic's Messages API request (`POST /v1/messages`, as llama-server serves it), and its
translation into the OpenAI chat request the rest of the server serves: system, text and image
blocks (base64, URL, or an upload by `file_id`), tool_use and tool_result blocks, tools and
tool_choice, stop sequences, sampling.

Unknown fields are ignored (`metadata`, `thinking`, `service_tier`, ...), as llama-server does.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.openai.openai_schemas import ChatCompletionRequest
from app.api.tool_schemas import NAME_PATTERN


class TextBlock(BaseModel):
    type: Literal["text"]
    text: str


class ImageSource(BaseModel):
    """Inline (base64), a URL, or an upload (`file`, Anthropic's Files API shape: here an id
    from POST /v1/media, the caller's tenant's like every upload a message names)."""

    type: Literal["base64", "url", "file"]
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    file_id: str | None = Field(default=None, max_length=64)

    def as_url(self) -> str:
        if self.type == "url":
            return self.url or ""
        return f"data:{self.media_type or 'image/png'};base64,{self.data or ''}"

    def as_part(self) -> dict[str, Any]:
        """The OpenAI content part of this image."""
        if self.type == "file":
            return {"type": "image_file", "image_file": {"file_id": self.file_id or ""}}
        return {"type": "image_url", "image_url": {"url": self.as_url()}}


class ImageBlock(BaseModel):
    type: Literal["image"]
    source: ImageSource


class ToolUseBlock(BaseModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(BaseModel):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock] = ""
    is_error: bool = False

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content)


class ThinkingBlock(BaseModel):
    """An earlier reply's thought, sent back in the history (its signature is not checked)."""

    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(BaseModel):
    """A thought the client holds only encrypted: nothing of it reaches the prompt."""

    type: Literal["redacted_thinking"]
    data: str = ""


Block = Annotated[
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class AnthropicMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class AnthropicTool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class AnthropicToolChoice(BaseModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool = False


def arguments_text(value: dict[str, Any]) -> str:
    """A tool_use block's input as the arguments text the model writes (compact JSON, as the
    tool grammar writes it), so a call sent back renders as it was generated."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class MessagesRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: int = Field(ge=1)
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    stop_sequences: list[str] | None = Field(default=None, max_length=4)
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    stream: bool = False
    tools: list[AnthropicTool] | None = Field(default=None, max_length=128)
    tool_choice: AnthropicToolChoice | None = None

    def system_text(self) -> str | None:
        if self.system is None or isinstance(self.system, str):
            return self.system or None
        return "\n\n".join(b.text for b in self.system) or None

    def chat_request(self) -> ChatCompletionRequest:
        """The same request in OpenAI's chat shape."""
        body: dict[str, Any] = {
            "messages": self._messages(),
            "max_tokens": self.max_tokens,
            "stream": self.stream,
        }
        for name in ("temperature", "top_p", "top_k"):
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        if self.stop_sequences:
            body["stop"] = self.stop_sequences
        if self.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in self.tools
            ]
        choice = self.tool_choice
        if choice is not None:
            if choice.type == "tool":
                body["tool_choice"] = {"type": "function", "function": {"name": choice.name or ""}}
            else:
                body["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[
                    choice.type
                ]
            body["parallel_tool_calls"] = not choice.disable_parallel_tool_use
        return ChatCompletionRequest.model_validate(body)

    def _messages(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        system = self.system_text()
        if system:
            out.append({"role": "system", "content": system})
        for m in self.messages:
            if isinstance(m.content, str):
                out.append({"role": m.role, "content": m.content})
            elif m.role == "assistant":
                out.append(_assistant(m.content))
            else:
                out.extend(_user(m.content))
        return out


def _assistant(blocks: list[Any]) -> dict[str, Any]:
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": arguments_text(b.input)},
        }
        for b in blocks
        if isinstance(b, ToolUseBlock)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    thought = "".join(b.thinking for b in blocks if isinstance(b, ThinkingBlock))
    if thought:  # as llama-server: the template decides whether the history shows it
        message["reasoning_content"] = thought
    return message


def _user(blocks: list[Any]) -> list[dict[str, Any]]:
    """Tool results first (each a tool message), then the user's own text and images."""
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": b.tool_use_id, "content": b.text()}
        for b in blocks
        if isinstance(b, ToolResultBlock)
    ]
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            parts.append(b.source.as_part())
    if parts:
        out.append({"role": "user", "content": parts})
    return out


class CountTokensRequest(MessagesRequest):
    """`/v1/messages/count_tokens`: a Messages request that generates nothing, so `max_tokens`
    may be left out (Anthropic's own endpoint takes none)."""

    max_tokens: int = Field(default=1, ge=1)
