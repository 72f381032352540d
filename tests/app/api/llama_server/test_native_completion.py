"""llama-server's native reply shapes, from engine events (the writer alone)."""

from __future__ import annotations

import json

from app.api.llama_server.native_completion import (
    NativeHead,
    NativeWriter,
    stop_type,
    tokens_cached,
)
from app.engine.events import Finished, TextDelta, Timings, TokenLogprob


def finished(reason: str, word: str | None = None, n: int = 3) -> Finished:
    return Finished(reason, 5, n, 2, Timings(cache_n=2, prompt_n=3, predicted_n=n, slot=1), word)


def test_stop_types_and_the_tokens_left_in_the_slot():
    assert stop_type(finished("length")) == "limit"
    assert stop_type(finished("stop", "END")) == "word"
    assert stop_type(finished("stop")) == "eos"
    assert stop_type(finished("cancelled")) == "none"
    # The last token sampled is never decoded; an end-of-generation token is not counted.
    assert tokens_cached(finished("length")) == 5 + 3 - 1
    assert tokens_cached(finished("stop")) == 5 + 3
    assert tokens_cached(finished("stop", n=0)) == 5


def delta(text: str, token: int, timings: Timings | None = None) -> TextDelta:
    prob = TokenLogprob(text, -0.5, list(text.encode()), [(text, -0.5, [])], token, [token])
    return TextDelta(text, [token], [prob], timings)


def frames(writer: NativeWriter, *events: TextDelta) -> list[dict]:
    out = [f for e in events for f in writer.text(e)]
    return [json.loads(f.removeprefix("data: ")) for f in out]


def test_a_stream_opens_with_the_prompts_progress_when_asked():
    head = NativeHead("m", "p", 5, {}, n_probs=1, return_progress=True, stream=True)
    timings = Timings(cache_n=2, prompt_n=3, prompt_ms=7.9, predicted_n=1, slot=1)
    progress, first, second = frames(NativeWriter(head), delta("a", 10, timings), delta("b", 11))
    assert progress["prompt_progress"] == {"total": 5, "cache": 2, "processed": 5, "time_ms": 7}
    assert progress["content"] == "" and progress["tokens_predicted"] == 0
    assert first["content"] == "a" and first["id_slot"] == 1 and first["tokens"] == [10]
    assert first["completion_probabilities"][0]["id"] == 10 and "timings" not in first
    assert second["tokens_predicted"] == 2


def test_the_whole_reply_holds_tokens_and_probabilities_when_asked():
    head = NativeHead("m", "p", 5, {"n_predict": 2}, n_probs=1, return_tokens=True)
    writer = NativeWriter(head)
    writer.keep(delta("a", 10))
    writer.keep(delta("\nb", 11))
    whole = writer.whole(finished("length", n=2), "a\nb")
    assert whole["content"] == "a\nb" and whole["tokens"] == [10, 11]
    assert [p["id"] for p in whole["completion_probabilities"]] == [10, 11]
    assert whole["has_new_line"] is True and whole["stop_type"] == "limit"
    assert whole["id_slot"] == 1 and whole["timings"]["prompt_n"] == 3
    streamed = NativeWriter(NativeHead("m", "p", 5, {}, n_probs=1, stream=True))
    (end,) = [json.loads(f.removeprefix("data: ")) for f in streamed.end(finished("stop"), "x")]
    assert end["content"] == "" and end["tokens"] == [] and end["stop"] is True
    assert "completion_probabilities" not in end
