"""POST /v1/messages (Anthropic's Messages API) through a real server with the tiny
test projector, with the official `anthropic` SDK, streamed and not."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from collections.abc import Iterator

import anthropic
import httpx
import jsonschema_rs
import pytest
from PIL import Image

from bench.lib.server_process import ROOT, ServerProcess

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
    },
}
HELLO = [{"role": "user", "content": "Say hello."}]
# This SDK has no sampling arguments (newer models take none); the server still does.
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    mmproj = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(mmproj)], check=True, capture_output=True)
    args = ("-np", "2", "-c", "4096", "--mmproj", str(mmproj), "--api-key", "sk-test")
    with ServerProcess(*args) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> anthropic.Anthropic:
    # The SDK sends its key as x-api-key.
    return anthropic.Anthropic(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _png() -> str:
    im = Image.new("RGB", (64, 64))
    im.putdata([((x * 7) % 256, (x * 3) % 256, 9) for x in range(64 * 64)])
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_text_message_with_system_and_usage(client: anthropic.Anthropic):
    kw = {
        "model": "m",
        "max_tokens": 8,
        "system": "You are brief.",
        "messages": HELLO,
        "extra_body": GREEDY,
    }
    first = client.messages.create(**kw)
    assert first.type == "message" and first.role == "assistant"
    assert first.content[0].type == "text" and first.content[0].text
    assert first.stop_reason in ("end_turn", "max_tokens")
    assert first.usage.output_tokens >= 1
    again = client.messages.create(**kw)
    # The same prompt again is read from our cache, and Anthropic counts it apart.
    prompt = first.usage.input_tokens + first.usage.cache_read_input_tokens
    assert again.usage.cache_read_input_tokens >= prompt - 1
    assert again.usage.input_tokens + again.usage.cache_read_input_tokens == prompt


def test_stream_gives_the_event_sequence_and_the_same_text(client: anthropic.Anthropic):
    kw = {"model": "m", "max_tokens": 8, "messages": HELLO, "extra_body": GREEDY}
    whole = client.messages.create(**kw)
    with client.messages.stream(**kw) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "message_delta" in kinds
    assert final.content[0].text == whole.content[0].text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_an_image_block(client: anthropic.Anthropic):
    image = {"type": "base64", "media_type": "image/png", "data": _png()}
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": image},
                {"type": "text", "text": "What is in the picture?"},
            ],
        }
    ]
    reply = client.messages.create(model="m", max_tokens=6, messages=messages)
    assert reply.content[0].type == "text"
    assert reply.usage.input_tokens + reply.usage.cache_read_input_tokens > 64  # the image's
    with client.messages.stream(model="m", max_tokens=6, messages=messages) as stream:
        assert stream.get_final_message().content[0].type == "text"


def test_stop_sequences_say_which_stopped(client: anthropic.Anthropic):
    messages = [{"role": "user", "content": "Count from 1 to 9 with spaces."}]
    reply = client.messages.create(
        model="m", max_tokens=48, messages=messages, stop_sequences=[" ", "\n"], extra_body=GREEDY
    )
    if reply.stop_reason == "stop_sequence":  # the tiny model need not write a space
        assert reply.stop_sequence in (" ", "\n")
    else:
        assert reply.stop_sequence is None


@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_loop_with_tool_use_and_tool_result(client: anthropic.Anthropic, streamed: bool):
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    kw = {"model": "m", "max_tokens": 64, "tools": [WEATHER], "extra_body": GREEDY}
    choice = {"type": "any", "disable_parallel_tool_use": True}
    if streamed:
        with client.messages.stream(messages=ask, tool_choice=choice, **kw) as stream:
            call = stream.get_final_message()
    else:
        call = client.messages.create(messages=ask, tool_choice=choice, **kw)
    assert call.stop_reason == "tool_use"
    uses = [b for b in call.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather" and uses[0].id.startswith("toolu_")
    assert jsonschema_rs.validator_for(WEATHER["input_schema"]).is_valid(uses[0].input)
    result = {"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny, 21 C"}
    history = [
        *ask,
        {"role": "assistant", "content": [b.model_dump() for b in call.content]},
        {"role": "user", "content": [result]},
    ]
    answer = client.messages.create(messages=history, **{**kw, "max_tokens": 6})
    kept = call.usage.input_tokens + call.usage.cache_read_input_tokens + call.usage.output_tokens
    # The result turn's prompt extends the call turn's, the call included.
    assert answer.usage.cache_read_input_tokens >= kept - 1


def test_count_tokens_counts_the_prompt_a_message_would_start_from(
    server: ServerProcess, client: anthropic.Anthropic
):
    kw = {"model": "m", "messages": HELLO}
    plain = client.messages.count_tokens(**kw).input_tokens
    terse = client.messages.count_tokens(system="Be terse.", **kw).input_tokens
    assert 0 < terse < client.messages.count_tokens(system="Be terse and kind.", **kw).input_tokens
    assert plain < client.messages.count_tokens(tools=[WEATHER], **kw).input_tokens
    reply = client.messages.create(max_tokens=1, extra_body=GREEDY, **kw)
    assert reply.usage.input_tokens + reply.usage.cache_read_input_tokens == plain
    # Only input_tokens, as llama-server and Anthropic answer; no max_tokens needed.
    url = server.base_url + "/v1/messages/count_tokens"
    raw = httpx.post(url, json={"messages": HELLO}, headers={"x-api-key": "sk-test"})
    assert raw.status_code == 200 and raw.json() == {"input_tokens": plain}


def test_thinking_blocks_in_the_history_reach_a_template_that_shows_them(
    client: anthropic.Anthropic,
):
    """A client such as Claude Code sends earlier replies' thinking back: it is the assistant
    message's reasoning, which this template (ChatML) does not show, so it counts nothing, and
    a redacted thought is taken too."""
    call = {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}
    thought = {"type": "thinking", "thinking": "Look it up.", "signature": "sig"}
    hidden = {"type": "redacted_thinking", "data": "opaque"}
    result = {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"}

    def history(*blocks: dict) -> list[dict]:
        return [
            *HELLO,
            {"role": "assistant", "content": [*blocks, call]},
            {"role": "user", "content": [result]},
        ]

    kw = {"model": "m", "tools": [WEATHER]}
    plain = client.messages.count_tokens(messages=history(), **kw).input_tokens
    assert (
        client.messages.count_tokens(messages=history(thought, hidden), **kw).input_tokens == plain
    )
    reply = client.messages.create(messages=history(thought), max_tokens=2, **kw)
    assert reply.type == "message"


def test_errors_come_in_anthropic_s_shape(server: ServerProcess, client: anthropic.Anthropic):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=8, messages=[])
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "invalid_request_error"
    url = server.base_url + "/v1/messages"
    missing = httpx.post(url, json={"messages": HELLO}, headers={"x-api-key": "sk-test"})
    assert missing.status_code == 400
    assert missing.json()["error"]["message"] == "max_tokens: is required"
    nokey = httpx.post(url, json={"max_tokens": 4, "messages": HELLO})
    assert nokey.status_code == 401
    assert nokey.json() == {
        "type": "error",
        "error": {
            "type": "authentication_error",
            "message": json.loads(nokey.text)["error"]["message"],
        },
    }
    bad = anthropic.Anthropic(base_url=server.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model="m", max_tokens=4, messages=HELLO)
