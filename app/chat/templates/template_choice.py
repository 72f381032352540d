"""Which chat template renders prompts: llama-server's `--chat-template`, `--chat-template-file`
and `--jinja`, resolved once at start.

- `--chat-template NAME`: one of llama.cpp's built-ins (`builtin_names()`). `chatml` with
  `--jinja` is llama.cpp's ChatML in Jinja (as llama-server); any other name renders with
  llama.cpp's C++ template, `--jinja` or not. (llama-server with `--jinja` would render a name
  as template text, i.e. the bare word; an unknown name is refused here instead.)
- `--chat-template TEXT` (anything with `{{` or `{%`) or `--chat-template-file PATH`: that
  template, in Jinja with `--jinja` (the default, as llama-server's), else matched to a C++
  built-in by llama.cpp (refused when it matches none, as llama-server does).
- Neither: the model's own GGUF template, the same way; a model without one gets ChatML, and a
  model template llama.cpp cannot match without `--jinja` falls back to ChatML, as llama-server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.chat.templates.builtin_template import BuiltinTemplate, builtin_names, is_known
from app.chat.templates.chat_template import CHATML, ChatTemplate


class PromptTemplate(Protocol):
    source: str  # the template in use, as /props reports it
    knows_tools: bool  # it renders the request's tools and calls itself
    supports_thinking: bool  # its `enable_thinking` changes the prompt

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        **variables: Any,
    ) -> str: ...


@dataclass(slots=True, frozen=True)
class TemplateChoice:
    template: str | None = None  # a built-in's name or a template's text; None: the model's
    jinja: bool = True


def is_template_text(value: str) -> bool:
    return "{{" in value or "{%" in value


def template_choice(template: str | None, template_file: str | None, jinja: bool) -> TemplateChoice:
    """The settings' choice, checked: a ValueError says what is wrong in the flags' words."""
    if template and template_file:
        raise ValueError("give --chat-template or --chat-template-file, not both")
    if template_file:
        template = _read(template_file)
    elif template and not is_template_text(template) and template not in builtin_names():
        raise ValueError(
            f"--chat-template {template!r} is not one of llama.cpp's built-in templates "
            f"({', '.join(builtin_names())}) nor a Jinja template"
        )
    choice = TemplateChoice(template, jinja)
    if template and is_template_text(template):
        _check_text(template, jinja, "--chat-template-file" if template_file else "--chat-template")
    return choice


def _read(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--chat-template-file {path!r} cannot be read: {e}") from None
    if not text.strip():
        raise ValueError(f"--chat-template-file {path!r} is empty")
    return text


def _check_text(text: str, jinja: bool, flag: str) -> None:
    if jinja:
        try:
            ChatTemplate(text)
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None
    elif not is_known(text):
        raise ValueError(
            f"{flag}: llama.cpp has no built-in template like this one; without --jinja only "
            f"its built-in templates are taken ({', '.join(builtin_names())})"
        )


def build_template(
    choice: TemplateChoice, model_template: str | None, bos: str = "", eos: str = ""
) -> PromptTemplate:
    """The template `choice` names, for a model whose GGUF carries `model_template`."""
    name = choice.template if choice.template in builtin_names() else None
    if name == "chatml" and choice.jinja:
        return ChatTemplate(CHATML, bos, eos)
    if name is not None:
        return BuiltinTemplate(name)
    text = choice.template or model_template
    if choice.jinja:
        return ChatTemplate(text, bos, eos)
    return BuiltinTemplate(text if text and is_known(text) else "chatml")
