"""OpenAI's tool-calling fields of a chat request: `tools`, `tool_choice`,
`parallel_tool_calls`, and what they ask of the reply."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.chat.tools import ToolSpec
from app.engine.request import RequestError

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"  # OpenAI's rule for function names


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(default="", max_length=10_000)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(BaseModel):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    type: Literal["function"]
    function: NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


def tool_specs(tools: list[ToolDef] | None, param: str = "tools") -> list[ToolSpec]:
    """The tools as the chat service takes them; a 400 for a name used twice or arguments that
    are not an object."""
    specs: list[ToolSpec] = []
    for i, t in enumerate(tools or []):
        f = t.function
        if any(s.name == f.name for s in specs):
            raise RequestError(
                f"{param}[{i}].function.name: {f.name!r} is used by two tools",
                param=f"{param}[{i}].function.name",
            )
        schema = f.parameters if f.parameters is not None else {"type": "object", "properties": {}}
        if schema.get("type", "object") != "object":
            where = f"{param}[{i}].function.parameters"
            raise RequestError(
                f'{where}: the arguments must be an object ({{"type": "object", ...}})', param=where
            )
        specs.append(ToolSpec(f.name, f.description, schema))
    return specs


def forced_tools(
    specs: list[ToolSpec], choice: ToolChoice | None, param: str = "tool_choice"
) -> list[ToolSpec] | None:
    """The tools the reply must call one of (`required`, or the named one), or None when the
    model may answer in text."""
    if choice is None or choice in ("none", "auto"):
        return None
    if not specs:
        raise RequestError(f"{param} asks for a tool call, but no tools were given", param=param)
    if choice == "required":
        return specs
    assert isinstance(choice, NamedToolChoice)
    named = [s for s in specs if s.name == choice.function.name]
    if not named:
        raise RequestError(
            f"{param} names {choice.function.name!r}, which is not one of the tools", param=param
        )
    return named
