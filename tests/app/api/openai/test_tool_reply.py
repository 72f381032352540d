"""`ToolCallWriter` with `auto` tools: text streams as content until a call may begin, the
call comes as the deltas the OpenAI SDK accumulates, and what is not a call is content after
all. Engine events are made by hand (no model can be made to write a call on demand)."""

from __future__ import annotations

import json

from app.api.openai.openai_shapes import ChatShape, Envelope
from app.api.openai.tool_reply import ToolCallWriter, held_back
from app.chat.templates.reasoning import Thinking
from app.chat.tools import calls_text
from app.engine.events import Finished, TextDelta, Timings


def _frames(
    pieces: list[str], reason: str = "stop", thinking: Thinking | None = None
) -> list[dict]:
    envelope = Envelope(ChatShape, "m")
    writer = ToolCallWriter(envelope, {"f"}, include_usage=False, timings={}, thinking=thinking)
    out = list(writer.start())
    for p in pieces:
        out += writer.text(TextDelta(p, []))
    out += writer.end(Finished(reason, 5, 3, 0, Timings()), "".join(pieces))
    return [json.loads(f.removeprefix("data: ")) for f in out if "[DONE]" not in f]


def _content(frames: list[dict]) -> str:
    return "".join(f["choices"][0]["delta"].get("content") or "" for f in frames if f["choices"])


def test_held_back_keeps_what_may_start_a_call():
    assert held_back("Hello") == 5
    assert held_back("Hello <tool") == 6
    assert held_back("Hi <tool_call>\n{") == 3
    assert held_back("a <") == 2


def test_text_then_a_call_streams_the_text_and_sends_the_call_as_deltas():
    call = calls_text([("f", '{"x":1}')])
    pieces = ["Let me look. ", call[:4], call[4:20], call[20:]]
    frames = _frames(pieces)
    assert _content(frames) == "Let me look. "
    deltas = [
        d for f in frames if f["choices"] for d in f["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert deltas[0]["id"].startswith("call_") and deltas[0]["function"]["name"] == "f"
    assert "".join(d["function"]["arguments"] for d in deltas) == '{"x":1}'
    assert frames[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_what_is_not_a_call_is_content_after_all():
    pieces = ["a <tool", "_call> is a tag"]
    frames = _frames(pieces)
    assert _content(frames) == "a <tool_call> is a tag"
    assert frames[-1]["choices"][0]["finish_reason"] == "stop"


def test_a_thought_goes_apart_and_a_call_after_it_is_still_found():
    call = calls_text([("f", '{"x":1}')])
    pieces = ["<thi", "nk>plan <tool_call> it</thi", "nk>\nOk. ", call]
    frames = _frames(pieces, thinking=Thinking("deepseek"))
    thought = "".join(
        f["choices"][0]["delta"].get("reasoning_content") or "" for f in frames if f["choices"]
    )
    assert thought == "plan <tool_call> it"  # a call inside the thought is not one
    assert _content(frames) == "Ok. "
    assert frames[-1]["choices"][0]["finish_reason"] == "tool_calls"
    writer = ToolCallWriter(Envelope(ChatShape, "m"), {"f"}, False, {}, Thinking("deepseek"))
    whole = writer.whole(Finished("stop", 5, 3, 0, Timings()), "".join(pieces))
    message = whole["choices"][0]["message"]
    assert message["reasoning_content"] == thought and message["tool_calls"]
