"""A reply in llama-server's native completion shape (`POST /completion`): one object with
`content`, `stop_type`, `timings`, ... or, streamed, a chunk per delta (`stop: false`) and a
last chunk (`stop: true`) with the final fields; the stream ends there, without `[DONE]`.

`completion_probabilities` hold each generated token's log-probability under the model (before
the sampling settings) and the `n_probs` most likely tokens at its step, named by id, text and
bytes, as llama-server reports them by default; with `post_sampling_probs`, each token's
probability after the sampling settings and the likeliest tokens they leave (`prob`,
`top_probs`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import JSONResponse

from app.api.event_writer import sse
from app.api.llama_server.native_errors import native_error_body, native_error_response
from app.engine.events import Failed, Finished, TextDelta, Timings, TokenLogprob


@dataclass(slots=True)
class NativeHead:
    """What a native reply says of its request, and what the request asked to be told."""

    model: str
    prompt: str  # the prompt as text (token ids detokenized)
    n_prompt: int
    settings: dict[str, Any]  # llama-server's generation_settings
    n_probs: int = 0
    post_sampling: bool = False  # the probabilities are after the sampling settings
    return_tokens: bool = False
    timings_per_token: bool = False
    return_progress: bool = False
    stream: bool = False
    index: int = 0  # the prompt's place in a request of several


def stop_type(done: Finished) -> str:
    """llama-server's words for why generation stopped."""
    if done.finish_reason == "length":
        return "limit"
    if done.finish_reason == "stop":
        return "word" if done.stop_sequence is not None else "eos"
    return "none"


def tokens_cached(done: Finished) -> int:
    """The tokens in the slot's KV after the reply (llama-server's n_past): the prompt and the
    generated tokens but the last one sampled, which is never decoded (an end-of-generation
    token is not counted among the generated ones)."""
    undecoded = 1 if stop_type(done) != "eos" and done.completion_tokens > 0 else 0
    return done.prompt_tokens + done.completion_tokens - undecoded


def _probs(items: list[TokenLogprob], post_sampling: bool) -> list[dict[str, Any]]:
    # llama-server's names: probabilities after sampling, or log-probabilities before it.
    value, top = ("prob", "top_probs") if post_sampling else ("logprob", "top_logprobs")
    return [
        {
            "id": i.id,
            "token": i.token,
            "bytes": i.bytes,
            value: i.logprob,
            top: [
                {"id": t_id, "token": t, "bytes": b, value: lp}
                for t_id, (t, lp, b) in zip(i.top_ids, i.top, strict=True)
            ],
        }
        for i in items
    ]


def prompt_progress(timings: Timings) -> dict[str, int]:
    """llama-server's prompt_progress once the whole prompt is in the KV (this server's engine
    reports no steps of a prompt's evaluation)."""
    total = timings.cache_n + timings.prompt_n
    cached, ms = timings.cache_n, int(timings.prompt_ms)
    return {"total": total, "cache": cached, "processed": total, "time_ms": ms}


@dataclass(slots=True)
class NativeWriter:
    """Writes one request's engine events in llama-server's native shapes (an EventWriter)."""

    head: NativeHead
    tokens: list[int] = field(default_factory=list)  # every generated token so far
    probs: list[TokenLogprob] = field(default_factory=list)
    progressed: bool = False  # the prompt_progress chunk went out

    def start(self) -> Iterable[str]:
        return ()

    def keep(self, event: TextDelta) -> None:
        self.tokens.extend(event.tokens)
        self.probs.extend(event.logprobs or [])

    def _partial(self, text: str, tokens: list[int], timings: Timings | None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "index": self.head.index,
            "content": text,
            "tokens": tokens,
            "stop": False,
            "id_slot": timings.slot if timings is not None else -1,
            "tokens_predicted": len(self.tokens),
            "tokens_evaluated": self.head.n_prompt,
        }
        if timings is not None and self.head.timings_per_token:
            chunk["timings"] = timings.as_dict()
        return chunk

    def text(self, event: TextDelta) -> Iterable[str]:
        if self.head.return_progress and not self.progressed and event.timings is not None:
            self.progressed = True
            opening = self._partial("", [], event.timings)
            yield sse({**opening, "prompt_progress": prompt_progress(event.timings)})
        self.keep(event)
        chunk = self._partial(event.text, event.tokens, event.timings)
        if event.logprobs:
            chunk["completion_probabilities"] = _probs(event.logprobs, self.head.post_sampling)
        yield sse(chunk)

    def _final(self, done: Finished, text: str) -> dict[str, Any]:
        head, streamed = self.head, self.head.stream
        whole: dict[str, Any] = {
            "index": self.head.index,
            "content": "" if streamed else text,  # a stream has sent the text already
            "tokens": self.tokens if head.return_tokens and not streamed else [],
            "id_slot": done.timings.slot,
            "stop": True,
            "model": head.model,
            "tokens_predicted": done.completion_tokens,
            "tokens_evaluated": done.prompt_tokens,
            "generation_settings": head.settings,
            "prompt": head.prompt,
            "has_new_line": "\n" in text,
            "truncated": False,  # a prompt too long for a slot is refused, never cut
            "stop_type": stop_type(done),
            "stopping_word": done.stop_sequence or "",
            "tokens_cached": tokens_cached(done),
            "timings": done.timings.as_dict(),
        }
        if head.n_probs and not streamed:
            whole["completion_probabilities"] = _probs(self.probs, head.post_sampling)
        return whole

    def end(self, done: Finished, text: str) -> Iterable[str]:
        yield sse(self._final(done, text))

    def fail(self, failed: Failed) -> Iterable[str]:
        yield sse(native_error_body(failed.message, failed.status))

    def whole(self, done: Finished, text: str) -> dict[str, Any]:
        return self._final(done, text)

    def error(self, failed: Failed) -> JSONResponse:
        return native_error_response(failed.message, failed.status)
