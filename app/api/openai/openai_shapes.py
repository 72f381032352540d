"""Response shapes of the two OpenAI endpoints, so one responder serves both.

`ChatShape` builds chat.completion / chat.completion.chunk objects, `TextShape` text_completion
ones; each response also carries llama-server's `timings` and, in usage, `cached_tokens`.
"""

from __future__ import annotations

import importlib.metadata
import time
import uuid
from typing import Any

from app.engine.events import Finished, TokenLogprob


def _bindings_version() -> str:
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# The backend configuration a reply came from (OpenAI's system_fingerprint; llama-server sends
# its build): the server's version and the llama.cpp bindings it runs.
SYSTEM_FINGERPRINT = f"kvchat-0.1.0-llama-cpp-python-{_bindings_version()}"


def usage(done: Finished) -> dict[str, Any]:
    return {
        "prompt_tokens": done.prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "total_tokens": done.prompt_tokens + done.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": done.cached_tokens},
    }


class ChatShape:
    object = "chat.completion"
    chunk_object = "chat.completion.chunk"
    id_prefix = "chatcmpl-"

    @staticmethod
    def opening() -> dict[str, Any] | None:
        # content null, as llama-server and OpenAI send it: no text yet.
        return {"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}

    @staticmethod
    def delta(text: str, logprobs: dict[str, Any] | None) -> dict[str, Any]:
        return {"index": 0, "delta": {"content": text}, "finish_reason": None, "logprobs": logprobs}

    @staticmethod
    def closing(reason: str) -> dict[str, Any]:
        return {"index": 0, "delta": {}, "finish_reason": reason}

    @staticmethod
    def whole(text: str, reason: str, logprobs: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": reason,
            "logprobs": logprobs,
        }

    @staticmethod
    def logprobs(items: list[TokenLogprob], _offset: int) -> dict[str, Any]:
        return {
            "content": [
                {
                    "token": i.token,
                    "logprob": i.logprob,
                    "bytes": i.bytes,
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": b} for t, lp, b in i.top],
                }
                for i in items
            ],
            "refusal": None,
        }


class TextShape:
    object = "text_completion"
    chunk_object = "text_completion"
    id_prefix = "cmpl-"

    @staticmethod
    def opening() -> dict[str, Any] | None:
        return None

    @staticmethod
    def delta(text: str, logprobs: dict[str, Any] | None) -> dict[str, Any]:
        return {"index": 0, "text": text, "finish_reason": None, "logprobs": logprobs}

    @staticmethod
    def closing(reason: str) -> dict[str, Any]:
        return {"index": 0, "text": "", "finish_reason": reason, "logprobs": None}

    @staticmethod
    def whole(text: str, reason: str, logprobs: dict[str, Any] | None) -> dict[str, Any]:
        return {"index": 0, "text": text, "finish_reason": reason, "logprobs": logprobs}

    @staticmethod
    def logprobs(items: list[TokenLogprob], offset: int) -> dict[str, Any]:
        """The legacy completions shape; `offset` is where the first item's text starts."""
        offsets = []
        for i in items:
            offsets.append(offset)
            offset += len(i.token)
        return {
            "tokens": [i.token for i in items],
            "token_logprobs": [i.logprob for i in items],
            "top_logprobs": [{t: lp for t, lp, _ in i.top} for i in items],
            "text_offset": offsets,
        }


Shape = type[ChatShape] | type[TextShape]


class Envelope:
    """id/created/model shared by every object of one response."""

    def __init__(self, shape: Shape, model: str, extra: dict[str, Any] | None = None) -> None:
        self.shape = shape
        self.id = shape.id_prefix + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.model = model
        self.extra = extra or {}  # fields every object carries (e.g. session_id)

    def make(self, obj: str, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
            **self.extra,
            **extra,
        }

    def chunk(self, choice: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
        return self.make(self.shape.chunk_object, [choice] if choice else [], **extra)

    def whole(
        self, text: str, done: Finished, logprobs: list[TokenLogprob] | None
    ) -> dict[str, Any]:
        lp = self.shape.logprobs(logprobs, 0) if logprobs is not None else None
        return self.make(
            self.shape.object,
            [self.shape.whole(text, done.finish_reason, lp)],
            usage=usage(done),
            timings=done.timings.as_dict(),
        )
