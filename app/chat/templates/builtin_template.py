"""`BuiltinTemplate`: llama.cpp's own C++ chat templates (`llama_chat_apply_template`), what
llama-server renders with when `--jinja` is off or `--chat-template` names a built-in.

The template is a built-in's name (`llama3`, `gemma`, ...) or a template's text, which llama.cpp
matches to one of its built-ins by the markers it holds (a text with `<|im_start|>` is ChatML).
Messages are role and text only: these templates know no tools, so a conversation with tools
reaches them in the generic format of app/chat/tools.py.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

import llama_cpp

# Probe messages: a template llama.cpp cannot match renders nothing for them.
_PROBE = [{"role": "user", "content": "hi"}]


@cache
def builtin_names() -> tuple[str, ...]:
    """The names llama.cpp's `--chat-template` takes, sorted as llama-server lists them."""
    n = llama_cpp.llama_chat_builtin_templates(None, 0)
    names = (ctypes.c_char_p * n)()
    llama_cpp.llama_chat_builtin_templates(names, n)
    return tuple(sorted(name.decode() for name in names if name))


def apply_template(
    template: str, messages: list[dict[str, Any]], add_generation_prompt: bool
) -> str | None:
    """`messages` rendered by llama.cpp; None when it knows no template like `template`."""
    chat = (llama_cpp.llama_chat_message * len(messages))()
    keep = []  # the encoded texts must outlive the call
    for item, message in zip(chat, messages, strict=True):
        role, content = message["role"].encode(), str(message.get("content") or "").encode()
        keep += [role, content]
        item.role, item.content = role, content
    tmpl = template.encode()
    size = 2 * sum(len(b) for b in keep) + 256
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_chat_apply_template(
            tmpl, chat, len(messages), add_generation_prompt, buf, size
        )
        if n < 0:
            return None
        if n <= size:
            return buf.raw[:n].decode("utf-8", "replace")
        size = n  # too small: llama.cpp says how much it needs


def is_known(template: str) -> bool:
    """True if llama.cpp renders with `template` (a built-in's name or a text it recognises)."""
    return apply_template(template, _PROBE, True) is not None


class BuiltinTemplate:
    knows_tools = False
    supports_thinking = False  # takes no enable_thinking

    def __init__(self, template: str) -> None:
        if not is_known(template):
            raise ValueError(f"llama.cpp has no built-in chat template like {template[:60]!r}")
        self.source = template  # what /props reports, as llama-server does

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        **variables: Any,
    ) -> str:
        """llama.cpp's C++ templates take no variables (as llama-server's without --jinja)."""
        text = apply_template(self.source, messages, add_generation_prompt)
        if text is None:  # checked when built: llama.cpp matched this template then
            raise ValueError("llama.cpp refused the chat template")
        return text
