"""`ChatTemplate`: renders messages with a Jinja chat template (the model's own, or one given by
--chat-template / --chat-template-file), sandboxed, as llama-server's `--jinja` does.

Rendering is deterministic for the same messages (on the same day, for a template that writes
today's date), which is what makes a conversation's prompt for turn N+1 extend turn N's prompt,
so the whole history is served from the KV cache.

A template that names `tools` renders them itself (Hermes, Qwen, Llama 3.1 style): the request's
tools reach it in OpenAI's shape, and calls in its messages as `tool_calls`. A call's arguments
are a `JsonText`: the object, for templates that walk it, which `tojson` writes back as the exact
text the model wrote, so a call renders into the next prompt token for token.

The template sees what llama.cpp's chat.cpp gives it: `messages`, `bos_token`, `eos_token`,
`enable_thinking` (from --reasoning or the request), `tools` when there are any, today's date as
`date_string` ("%d %b %Y", Llama 3.x) and `datetime` ("%b %d %Y", firefunction), the request's
`chat_template_kwargs` over those, and `add_generation_prompt` only when it is true.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from jinja2 import TemplateError, Undefined, meta
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


class _Undefined(Undefined):
    """As llama.cpp's Jinja: an undefined value added to a string is the empty string
    (firefunction v2's template adds its undefined `functions`); anything else still fails."""

    __slots__ = ()

    def __add__(self, other: Any) -> Any:
        return other if isinstance(other, str) else self._fail_with_undefined_error()

    def __radd__(self, other: Any) -> Any:
        return other if isinstance(other, str) else self._fail_with_undefined_error()


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


def _dates() -> dict[str, str]:
    """llama.cpp's extra context: today's date in the two forms real templates read."""
    now = datetime.datetime.now()
    return {"datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}


# What llama.cpp renders to see whether a template can think: one user message, then the
# generation prompt (common_chat_templates_support_enable_thinking).
_PROBE = [{"role": "user", "content": "test"}]


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    # As llama.cpp's own Jinja writes it (keys in order, no HTML escapes), not jinja2's.
    if isinstance(value, JsonText) and indent is None:
        return value.text
    return json.dumps(value, indent=indent, ensure_ascii=False)


class ChatTemplate:
    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "") -> None:
        # loopcontrols: {% break %} and {% continue %}, as llama.cpp's Jinja (Command-R7B).
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols"],
            undefined=_Undefined,
        )
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
        self.supports_thinking = self._thinking_changes_prompt()

    def _thinking_changes_prompt(self) -> bool:
        """True when `enable_thinking` changes the generation prompt: the template can think
        (what --reasoning auto turns on, as llama-server's)."""
        try:
            on = self.render(_PROBE, True, enable_thinking=True)
            off = self.render(_PROBE, True, enable_thinking=False)
        except Exception:  # noqa: BLE001 (one that cannot render the probe cannot think either)
            return False
        return on != off

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        **variables: Any,
    ) -> str:
        """`variables`: more for the template (enable_thinking, chat_template_kwargs), over the
        rest as in llama.cpp; `add_generation_prompt` is left undefined when false, as there."""
        context: dict[str, Any] = {
            "messages": messages,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        if tools:
            context["tools"] = tools
        context |= _dates() | variables
        if add_generation_prompt:
            context["add_generation_prompt"] = True
        try:
            return self._template.render(**context)
        except ChatTemplateError:
            raise
        except TemplateError as e:
            raise ChatTemplateError(f"chat template failed: {e}") from e
