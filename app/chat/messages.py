"""`ChatMessage`: one OpenAI chat message and its content parts (text, image URL, uploaded
image) or tool calls, as the API validates it and as prompts are built from it."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.chat.templates.chat_template import JsonText


class ImageURL(BaseModel):
    url: str
    detail: str | None = None


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ImagePart(BaseModel):
    type: Literal["image_url"]
    image_url: ImageURL


class ImageFile(BaseModel):
    file_id: str = Field(max_length=64)  # an id from POST /v1/media


class ImageFilePart(BaseModel):
    """An uploaded image, as OpenAI's `image_file` content part."""

    type: Literal["image_file"]
    image_file: ImageFile


class FunctionCall(BaseModel):
    name: str
    arguments: str | dict[str, Any]  # a JSON text (OpenAI's), or the object itself

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


class MessageToolCall(BaseModel):
    """A call an assistant message made (OpenAI's `tool_calls` item)."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall

    def for_template(self) -> dict[str, Any]:
        """OpenAI's shape, the arguments an object that keeps the text it came as (JsonText),
        or the text itself where it is not a JSON object."""
        text = self.function.arguments_text()
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        arguments = JsonText(text, value) if isinstance(value, dict) else text
        function = {"name": self.function.name, "arguments": arguments}
        return {"id": self.id, "type": self.type, "function": function}


ContentPart = Annotated[TextPart | ImagePart | ImageFilePart, Field(discriminator="type")]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = None  # an assistant message's calls
    tool_call_id: str | None = None  # a tool message: the call it answers
    # An assistant message's thought (llama-server's field): given to the template, which
    # decides whether the history shows it.
    reasoning_content: str | None = None

    def text(self, delimiter: str = "") -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return delimiter.join(p.text for p in self.content if isinstance(p, TextPart))

    def for_template(self, marker: str | None = None) -> dict[str, Any]:
        """The shape chat templates expect: role and plain-text content, with `marker` where
        each image goes (images are dropped without one); tool calls and the call a tool
        message answers where there are (only a template that knows tools sees those); the
        thought where there is one."""
        out: dict[str, Any] = {"role": self.role, "content": self._template_text(marker)}
        if self.tool_calls:
            out["tool_calls"] = [c.for_template() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.role == "tool" and self.name is not None:
            out["name"] = self.name
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        return out

    def _template_text(self, marker: str | None) -> str:
        if marker is None or not isinstance(self.content, list):
            return self.text()
        return "".join(p.text if isinstance(p, TextPart) else marker for p in self.content)

    def images(self) -> list[ImagePart | ImageFilePart]:
        if not isinstance(self.content, list):
            return []
        return [p for p in self.content if isinstance(p, ImagePart | ImageFilePart)]

    def has_images(self) -> bool:
        return bool(self.images())
