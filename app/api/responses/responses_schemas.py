"""The OpenAI Responses API's request (`POST /v1/responses`, the subset the SDK's common paths
use), its translation into what the chat service takes (messages, and a chat request for the
sampling, the grammar and the tools). Response ids: app/chat/sessions/stored_responses.py.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.openai.openai_schemas import ChatCompletionRequest
from app.api.tool_schemas import NAME_PATTERN
from app.chat.messages import ChatMessage, FunctionCall, MessageToolCall
from app.engine.request import RequestError


class TextPart(BaseModel):
    type: Literal["input_text", "output_text", "text"]
    text: str


class ImagePart(BaseModel):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = Field(default=None, max_length=64)  # an id from POST /v1/media
    detail: str | None = None


class MessageItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[TextPart | ImagePart]


class FunctionCallItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function_call"]
    call_id: str = Field(max_length=64)
    name: str
    arguments: str


class FunctionCallOutputItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function_call_output"]
    call_id: str = Field(max_length=64)
    output: str | list[TextPart]

    def text(self) -> str:
        return self.output if isinstance(self.output, str) else "".join(p.text for p in self.output)


Item = MessageItem | FunctionCallItem | FunctionCallOutputItem


class FunctionTool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    name: str | None = Field(default=None, pattern=NAME_PATTERN)
    description: str = ""
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedFunction(BaseModel):
    type: Literal["function"]
    name: str


class TextFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: TextFormat | None = None


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    input: str | list[Item] = Field(min_length=1)
    instructions: str | None = Field(default=None, max_length=100_000)
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    text: TextOptions | None = None
    tools: list[FunctionTool] | None = Field(default=None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | NamedFunction | None = None
    parallel_tool_calls: bool = True
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = Field(default=None, max_length=200)
    metadata: dict[str, str] | None = None
    # llama-server's stream telemetry: the timings on each text delta, and the prompt's
    # progress in a response.in_progress event.
    timings_per_token: bool = False
    return_progress: bool = False

    def chat_request(self) -> ChatCompletionRequest:
        """The same generation in a chat request's fields (its messages are not used)."""
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": ""}],
            "stream": self.stream,
            "parallel_tool_calls": self.parallel_tool_calls,
        }
        if self.max_output_tokens is not None:
            body["max_tokens"] = self.max_output_tokens
        for name in ("temperature", "top_p"):
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        if self.tools:
            body["tools"] = [_tool(i, t) for i, t in enumerate(self.tools)]
        choice = self.tool_choice
        if isinstance(choice, NamedFunction):
            body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
        elif choice is not None:
            body["tool_choice"] = choice
        fmt = self.text.format if self.text else None
        if fmt is not None and fmt.type == "json_schema":
            if fmt.schema_ is None:
                raise RequestError("text.format: json_schema needs a schema", param="text.format")
            spec = {"name": fmt.name, "schema": fmt.schema_, "strict": fmt.strict}
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
        elif fmt is not None and fmt.type == "json_object":
            body["response_format"] = {"type": "json_object"}
        return ChatCompletionRequest.model_validate(body)

    def items(self) -> list[Item]:
        if isinstance(self.input, str):
            return [MessageItem(role="user", content=self.input)]
        return list(self.input)


def _tool(index: int, t: FunctionTool) -> dict[str, Any]:
    if t.type != "function" or t.name is None:
        raise RequestError(
            f"tools[{index}].type: only function tools (with a name) are supported, not {t.type!r}",
            param=f"tools[{index}].type",
            code="unsupported_parameter",
        )
    function = {"name": t.name, "description": t.description, "parameters": t.parameters}
    return {"type": "function", "function": function}


def _parts(content: list[TextPart | ImagePart]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for p in content:
        if isinstance(p, TextPart):
            parts.append({"type": "text", "text": p.text})
        elif p.file_id is not None:
            parts.append({"type": "image_file", "image_file": {"file_id": p.file_id}})
        elif p.image_url is not None:
            parts.append({"type": "image_url", "image_url": {"url": p.image_url}})
        else:
            raise RequestError("input_image needs an image_url or a file_id", param="input")
    return parts


def input_messages(items: list[Item]) -> tuple[list[str], list[ChatMessage]]:
    """(system texts, the conversation's new messages) of the input items; system and developer
    messages come first, before any other item."""
    systems: list[str] = []
    out: list[ChatMessage] = []
    for item in items:
        if isinstance(item, MessageItem) and item.role in ("system", "developer"):
            if out:
                raise RequestError(
                    "input: system and developer messages must come before the conversation "
                    "(or use instructions)",
                    param="input",
                )
            content = item.content
            systems.append(
                content
                if isinstance(content, str)
                else "".join(p.text for p in content if isinstance(p, TextPart))
            )
        elif isinstance(item, MessageItem):
            content = item.content if isinstance(item.content, str) else _parts(item.content)
            out.append(ChatMessage.model_validate({"role": item.role, "content": content}))
        elif isinstance(item, FunctionCallItem):
            function = FunctionCall(name=item.name, arguments=item.arguments)
            call = MessageToolCall(id=item.call_id, function=function)
            last = out[-1] if out else None
            if last is None or last.role != "assistant":
                last = ChatMessage(role="assistant", content="")
                out.append(last)
            last.tool_calls = [*(last.tool_calls or []), call]
        else:
            out.append(ChatMessage(role="tool", content=item.text(), tool_call_id=item.call_id))
    return systems, out
