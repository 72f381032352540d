"""A chat reply's text as the OpenAI chunks llama-server streams: the thought as
`reasoning_content` deltas, the answer as `content` deltas (app/chat/templates/reasoning.py splits
them).

Logprobs ride on the next chunk sent, so none are lost while text is held back (a possible
`</think>` not yet complete).
"""

from __future__ import annotations

from typing import Any

from app.api.openai.openai_shapes import ChatShape
from app.chat.templates.reasoning import ReplySplit, Thinking, split_reasoning
from app.engine.events import TokenLogprob


class ReplyParts:
    def __init__(self, thinking: Thinking) -> None:
        self.split = ReplySplit(thinking)
        self.logprobs: list[TokenLogprob] = []  # not yet sent
        self.offset = 0  # characters of content sent (the legacy logprobs shape's offsets)

    def feed(self, text: str, logprobs: list[TokenLogprob] | None) -> list[dict[str, Any]]:
        """The chunks' choices for one text delta (none while the text is held back)."""
        self.logprobs.extend(logprobs or [])
        return [self._choice(kind, piece) for kind, piece in self.split.feed(text)]

    def finish(self) -> list[dict[str, Any]]:
        """The choices of what was held back when the reply ends."""
        return [self._choice(kind, piece) for kind, piece in self.split.finish()]

    def _choice(self, kind: str, piece: str) -> dict[str, Any]:
        lp = ChatShape.logprobs(self.logprobs, self.offset) if self.logprobs else None
        self.logprobs = []
        if kind == "reasoning":
            return {"index": 0, "delta": {"reasoning_content": piece}, "finish_reason": None}
        self.offset += len(piece)
        return ChatShape.delta(piece, lp)


def with_reasoning(whole: dict[str, Any], thinking: Thinking) -> dict[str, Any]:
    """A whole chat completion with its message's thought moved to `reasoning_content`."""
    for choice in whole["choices"]:
        message = choice["message"]
        reasoning, message["content"] = split_reasoning(message["content"], thinking)
        if reasoning is not None:
            message["reasoning_content"] = reasoning
    return whole
