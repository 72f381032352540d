"""`ChatTemplate`: renders messages with a Jinja chat template (the model's own, or one given by
--chat-template / --chat-template-file), sandboxed, as llama-server's `--jinja` does.

Rendering is deterministic for the same messages, which is what makes a conversation's prompt for
turn N+1 extend turn N's prompt, so the whole history is served from the KV cache.

A template that names `tools` renders them itself (Hermes, Qwen, Llama 3.1 style): the request's
tools reach it in OpenAI's shape, and calls in its messages as `tool_calls`. A call's arguments
are a `JsonText`: the object, for templates that walk it, which `tojson` writes back as the exact
text the model wrote, so a call renders into the next prompt token for token.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from jinja2 import TemplateError, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

# llama.cpp's ChatML, used when a GGUF carries no template or --chat-template chatml is given.
CHATML = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)


class ChatTemplateError(ValueError):
    pass


class JsonText(dict[str, Any]):
    """A JSON object that keeps the text it was read from."""

    def __init__(self, text: str, value: dict[str, Any]) -> None:
        super().__init__(value)
        self.text = text


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    # As llama.cpp's own Jinja writes it (keys in order, no HTML escapes), not jinja2's.
    if isinstance(value, JsonText) and indent is None:
        return value.text
    return json.dumps(value, indent=indent, ensure_ascii=False)


class ChatTemplate:
    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        env.filters["tojson"] = _tojson
        self.source = source or CHATML
        try:
            parsed = env.parse(self.source)
        except TemplateError as e:
            raise ChatTemplateError(f"the chat template is not valid Jinja: {e}") from e
        self._template = env.from_string(parsed)
        # As llama.cpp's chat.cpp decides: a template that reads `tools` renders them.
        self.knows_tools = "tools" in meta.find_undeclared_variables(parsed)
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        **variables: Any,
    ) -> str:
        """`variables`: more for the template (chat_template_kwargs, e.g. enable_thinking)."""
        extra = {**variables, "tools": tools} if tools else variables
        try:
            return self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **extra,
            )
        except ChatTemplateError:
            raise
        except TemplateError as e:
            raise ChatTemplateError(f"chat template failed: {e}") from e
