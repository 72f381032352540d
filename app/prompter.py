"""`Prompter`: chat messages -> rendered text -> TokenSequence, with the model's own template."""

from __future__ import annotations

from typing import Any

from app.engine.chat_template import ChatTemplate
from app.engine.model import Model
from mm.token_sequence import TokenSequence


class Prompter:
    def __init__(self, model: Model) -> None:
        self._model = model
        self._bos = model.token_text(model.bos) if model.bos >= 0 else ""
        eos = model.token_text(model.eos) if model.eos >= 0 else ""
        self.template = ChatTemplate(model.chat_template(), self._bos, eos)

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        return self.template.render(messages, add_generation_prompt)

    def tokenize(self, text: str) -> TokenSequence:
        # The template may already start with BOS; adding another would change every prompt's
        # first token and so nothing else. Add the model's special tokens only when it does not.
        add_special = not (self._bos and text.startswith(self._bos))
        return TokenSequence(
            self._model.tokenize(text, add_special=add_special, parse_special=True)
        )

    def chat(self, messages: list[dict[str, Any]]) -> TokenSequence:
        return self.tokenize(self.render(messages))

    def text_prompt(self, prompt: str | list[int]) -> TokenSequence:
        if isinstance(prompt, str):
            return TokenSequence(self._model.tokenize(prompt, add_special=True, parse_special=True))
        return TokenSequence(prompt)
