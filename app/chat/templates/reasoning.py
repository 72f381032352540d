"""Reasoning (`<think>` ... `</think>`) told apart from the answer, as llama-server's
`--reasoning-format` does: whole replies and streams split the same way.

Formats (llama-server's names): `none` leaves the tags in the content; `deepseek` (and `auto`,
its default) moves the thought into `reasoning_content`; `deepseek-legacy` also fills
`reasoning_content` but keeps the tags in the content.

`auto` splits only where the chat template knows reasoning (it can think, or writes `<think>`
or `reasoning_content` itself), as llama-server's template analysis decides: with any other
template the reply is content as it comes, so a reply's first blank line streams at once instead
of waiting to see whether `<think>` follows it.

A reply is reasoning from its start when it opens with `<think>` (after blank space), or when the
prompt already opened the block (the template's generation prompt ends with `<think>`: thinking
forced open). The thought ends at `</think>`; a reply that never closes it is all thought.
The thought is stripped of blank space at both ends, the answer after it at its start.

Invariant: the pieces a `ReasoningSplitter` yields for any division of a text into deltas join
to what `split_reasoning` gives for the whole text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

OPEN, CLOSE = "<think>", "</think>"
Kind = Literal["reasoning", "content"]
Format = Literal["none", "deepseek", "deepseek-legacy", "auto"]
FORMATS: tuple[str, ...] = ("none", "deepseek", "deepseek-legacy", "auto")


@dataclass(slots=True, frozen=True)
class Thinking:
    """How one reply's reasoning is told apart."""

    format: Format = "auto"
    forced_open: bool = False  # the prompt ends inside a `<think>` block

    @property
    def splits(self) -> bool:
        return self.format != "none"

    @property
    def keeps_tags(self) -> bool:
        return self.format == "deepseek-legacy"


@dataclass(slots=True)
class ReasoningAsk:
    """What a request asks of reasoning (llama-server's request fields); None: the server's."""

    format: Format | None = None  # reasoning_format
    template_kwargs: dict[str, Any] | None = None  # chat_template_kwargs (enable_thinking, ...)

    def kwargs(self) -> dict[str, Any]:
        """The request's template variables, over the server's (`enable_thinking` from its
        --reasoning mode: app/chat/templates/prompter.py)."""
        return dict(self.template_kwargs or {})

    def thinking(self, default: Format, prompt_text: str, reasons: bool = True) -> Thinking:
        """`reasons`: the chat template knows reasoning (`knows_reasoning`)."""
        format = self.format or default
        if format == "auto" and not reasons:
            format = "none"
        return Thinking(format, opened_in_prompt(prompt_text))


def knows_reasoning(source: str, supports_thinking: bool) -> bool:
    """Whether a chat template knows reasoning: it can think, or it writes thoughts itself."""
    return supports_thinking or OPEN in source or "reasoning_content" in source


def opened_in_prompt(prompt_text: str) -> bool:
    """Whether a rendered prompt leaves the model inside a thought (its generation prompt
    ends with `<think>`)."""
    return prompt_text.rstrip().endswith(OPEN)


def _partial_tail(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a proper start of `tag` (held back: the
    tag may be completed by the next delta)."""
    for k in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


class ReasoningSplitter:
    """Feeds on text deltas; yields (kind, piece) as soon as a piece is certain."""

    def __init__(self, forced_open: bool = False) -> None:
        self.state = "reasoning" if forced_open else "start"
        self.pending = ""  # received, not yet yielded
        self.lead = True  # still at the start of the current part (blank space dropped)

    def feed(self, text: str) -> Iterator[tuple[Kind, str]]:
        self.pending += text
        while True:
            before = (self.state, len(self.pending))
            yield from self._step()
            if (self.state, len(self.pending)) == before:
                return

    def _step(self) -> Iterator[tuple[Kind, str]]:
        if self.state == "start":
            head = self.pending.lstrip()
            if head.startswith(OPEN):
                self.state, self.pending, self.lead = "reasoning", head[len(OPEN) :], True
            elif not (OPEN.startswith(head)):
                self.state, self.lead = "plain", False  # no thought: the text as it came
        elif self.state == "reasoning":
            if self.lead:
                self.pending = self.pending.lstrip()
                self.lead = not self.pending
            end = self.pending.find(CLOSE)
            if end >= 0:
                thought = self.pending[:end].rstrip()
                self.pending = self.pending[end + len(CLOSE) :]
                self.state, self.lead = "answer", True
                if thought:
                    yield "reasoning", thought
                return
            # Blank space and a possible start of `</think>` wait: they may end the thought.
            keep = _partial_tail(self.pending, CLOSE)
            body = self.pending[: len(self.pending) - keep]
            sure = body.rstrip()
            if sure:
                yield "reasoning", sure
                self.pending = self.pending[len(sure) :]
        else:  # "answer" after a thought, or "plain"
            if self.lead:
                self.pending = self.pending.lstrip()
                self.lead = not self.pending
            if self.pending:
                piece, self.pending = self.pending, ""
                yield "content", piece

    def finish(self) -> Iterator[tuple[Kind, str]]:
        """What is left when the reply ends."""
        rest, self.pending = self.pending, ""
        if self.state == "start":
            if rest:
                yield "content", rest  # a reply that is (the start of) "<think>" and no more
        elif self.state == "reasoning":
            thought = rest.strip() if self.lead else rest.rstrip()
            if thought:
                yield "reasoning", thought


class ReplySplit:
    """A reply's deltas as (kind, piece) in the reply's format: `none` passes the text through
    as content; `deepseek-legacy` passes it through and yields the thought beside it."""

    def __init__(self, thinking: Thinking) -> None:
        self.thinking = thinking
        self.splitter = ReasoningSplitter(thinking.forced_open) if thinking.splits else None

    def feed(self, text: str) -> list[tuple[Kind, str]]:
        if self.splitter is None:
            return [("content", text)] if text else []
        return self._kept(list(self.splitter.feed(text)), text)

    def finish(self) -> list[tuple[Kind, str]]:
        if self.splitter is None:
            return []
        return self._kept(list(self.splitter.finish()), "")

    def _kept(self, pieces: list[tuple[Kind, str]], raw: str) -> list[tuple[Kind, str]]:
        if not self.thinking.keeps_tags:
            return pieces
        thoughts = [p for p in pieces if p[0] == "reasoning"]
        return [*thoughts, ("content", raw)] if raw else thoughts


def split_reasoning(text: str, thinking: Thinking) -> tuple[str | None, str]:
    """(reasoning or None, content) of a whole reply."""
    parts: dict[str, list[str]] = {"reasoning": [], "content": []}
    split = ReplySplit(thinking)
    for kind, piece in [*split.feed(text), *split.finish()]:
        parts[kind].append(piece)
    return "".join(parts["reasoning"]) or None, "".join(parts["content"])
