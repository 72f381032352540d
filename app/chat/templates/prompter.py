"""`Prompter`: chat messages -> rendered text -> TokenSequence, with the chat template chosen at
start (app/chat/templates/template_choice.py; by default the model's own)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from app.chat.templates.reasoning import knows_reasoning
from app.chat.templates.template_choice import TemplateChoice, build_template
from app.engine.tokenizer import Tokenizer
from mm.token_sequence import TokenSequence


def thinking_default(mode: str, supported: bool) -> bool:
    """The template's `enable_thinking` under --reasoning `mode`, as llama-server sets it: on
    and off say so; auto thinks where the template can."""
    return mode == "on" or (mode == "auto" and supported)


@dataclass(slots=True, frozen=True)
class PromptEnd:
    """How a chat prompt ends, as llama-server's `add_generation_prompt` and its assistant
    prefill (`continue_final_message`, or a last assistant message) say."""

    generation_prompt: bool = True  # the template's opening of the assistant's turn
    # The text the reply goes on from (the last assistant message's, its text parts joined by
    # a blank line), put after the generation prompt; None: a new reply.
    prefill: str | None = None


class Prompter:
    def __init__(
        self, model: Tokenizer, choice: TemplateChoice | None = None, reasoning: str = "auto"
    ) -> None:
        """`reasoning`: the server's --reasoning mode (on, off, auto)."""
        self._model = model
        self._bos = model.token_text(model.bos) if model.bos >= 0 else ""
        eos = model.token_text(model.eos) if model.eos >= 0 else ""
        self.template = build_template(
            choice or TemplateChoice(), model.chat_template(), self._bos, eos
        )
        self.knows_tools = self.template.knows_tools  # it renders tools and calls (OpenAI shapes)
        self.supports_thinking = self.template.supports_thinking
        self.knows_reasoning = knows_reasoning(self.template.source, self.supports_thinking)
        # Template variables: enable_thinking always (llama-server's), a request's
        # chat_template_kwargs over it (`rendering`).
        self.kwargs: dict[str, Any] = {
            "enable_thinking": thinking_default(reasoning, self.supports_thinking)
        }
        self.continuation = self._turn_continuation()

    def rendering(self, kwargs: dict[str, Any]) -> Prompter:
        """This prompter, rendering with the template variables `kwargs` (e.g. a request's
        `enable_thinking`); itself when there are none."""
        if not kwargs:
            return self
        view = copy.copy(self)
        view.kwargs = {**self.kwargs, **kwargs}
        return view

    def _turn_continuation(self) -> list[int] | None:
        """Tokens the template puts between an assistant reply and the next user message.

        Found by rendering a sentinel conversation; None if the template's text there does not
        tokenize the same alone as inside a whole prompt (then nothing is prefilled ahead).
        """
        reply, user = "kvchatREPLYsentinel", "kvchatUSERsentinel"
        try:
            text = self.render(
                [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": user},
                ],
                add_generation_prompt=True,
            )
        except ValueError:
            return None
        start = text.find(reply)
        end = text.find(user, start)
        if start < 0 or end < 0:
            return None
        start += len(reply)
        before = self.tokenize(text[:start]).tokens
        upto = self.tokenize(text[:end]).tokens
        whole = self.tokenize(text).tokens
        if upto[: len(before)] != before or whole[: len(upto)] != upto or len(upto) == len(before):
            return None
        tokens = list(upto[len(before) :])
        return tokens if self._model.is_eog(tokens[0]) else None

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        """`tools` (OpenAI's shape) only for a template that `knows_tools`."""
        return self.template.render(messages, add_generation_prompt, tools, **self.kwargs)

    def render_end(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, end: PromptEnd
    ) -> str:
        """The prompt of these messages ending as `end` says; with a prefill, `messages` are
        those before the message it continues (llama.cpp's continuation: the generation prompt,
        then that message's text)."""
        if end.prefill is None:
            return self.render(messages, end.generation_prompt, tools)
        return self.render(messages, True, tools) + end.prefill

    def needs_bos(self, text: str) -> bool:
        # The template may already start with BOS; adding another would change every prompt's
        # first token and so nothing else. Add the model's special tokens only when it does not.
        return not (self._bos and text.startswith(self._bos))

    def tokenize(self, text: str) -> TokenSequence:
        return TokenSequence(
            self._model.tokenize(text, add_special=self.needs_bos(text), parse_special=True)
        )

    def extend(self, tokens: list[int], done: str, text: str) -> list[int]:
        """Tokens for `text`, which starts with `done` whose tokens are `tokens`: the rest is
        tokenized alone and appended (no BOS; special tokens parsed)."""
        if not done:
            return list(self.tokenize(text).tokens)
        rest = text[len(done) :]
        more = self._model.tokenize(rest, add_special=False, parse_special=True) if rest else []
        return [*tokens, *more]

    def matches(self, tokens: list[int], text: str) -> bool:
        """True if the tokens' text is exactly `text` (generated ids can stand in for it)."""
        return self.text_of(tokens) == text

    def text_of(self, tokens: list[int]) -> str | None:
        """The tokens' text; None while shutting down (no reading freed memory)."""
        if self._model.closed:
            return None
        return self._model.detokenize(tokens)

    def tail_text(self, prompt: TokenSequence, n: int = 8) -> str:
        """The text of the prompt's last `n` tokens, special ones spelled out."""
        tail = [t for t in prompt.tokens[-n:] if t >= 0]
        return "" if self._model.closed else self._model.detokenize(tail, special=True)

    def chat(self, messages: list[dict[str, Any]]) -> TokenSequence:
        return self.tokenize(self.render(messages))

    def text_prompt(self, prompt: str | list[int] | list[int | str]) -> TokenSequence:
        """A completion's prompt: text, token ids, or (llama-server's) a list mixing both,
        whose first text piece alone gets the model's leading special tokens."""
        if isinstance(prompt, str):
            return TokenSequence(self._model.tokenize(prompt, add_special=True, parse_special=True))
        tokens: list[int] = []
        for i, piece in enumerate(prompt):
            if isinstance(piece, str):
                tokens += self._model.tokenize(piece, add_special=i == 0, parse_special=True)
            else:
                tokens.append(piece)
        return TokenSequence(tokens)
