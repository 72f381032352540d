"""llama-server's --chat-template, --chat-template-file and --jinja through a real server: the
template in use shows in /props and /apply-template, a second turn is served from the cache in
each mode, a template that knows tools renders them its own way, and bad choices stop the start."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from bench.lib.server_process import ServerProcess
from tests.app.api.weather_tool import WEATHER

HERMES = Path(__file__).with_name("hermes_tools.jinja")  # a Hermes/Qwen-style template
FIRST = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "What is the capital of France?"},
]
GENERIC_TOOLS = "You may call one or more functions"  # app/chat/tools.py's system text


@dataclass(slots=True)
class Mode:
    flags: list[str]
    source: str  # in what /props reports as the template
    user: str  # what the template writes before a user message
    knows_tools: bool = False


MODES = {
    "chatml": Mode(
        ["--chat-template", "chatml"], "{%- for message in messages -%}", "<|im_start|>user\n"
    ),
    "phi3": Mode(["--chat-template", "phi3"], "phi3", "<|user|>\n"),
    "file": Mode(
        ["--chat-template-file", str(HERMES)], HERMES.read_text(), "<|im_start|>user\n", True
    ),
    "no-jinja": Mode(["--no-jinja"], "<|im_start|>", "<|im_start|>user\n"),
}


@pytest.fixture(scope="module", params=list(MODES))
def mode(request: pytest.FixtureRequest) -> Iterator[tuple[ServerProcess, Mode]]:
    chosen = MODES[request.param]
    with ServerProcess("-np", "1", "-c", "2048", "-n", "32", *chosen.flags) as srv:
        yield srv, chosen


def _client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)


def _apply(server: ServerProcess, messages: list[dict], **extra: Any) -> str:
    body = {"messages": messages, **extra}
    return httpx.post(server.base_url + "/apply-template", json=body).json()["prompt"]


def test_props_and_apply_template_show_the_chosen_template(mode: tuple[ServerProcess, Mode]):
    server, chosen = mode
    props = httpx.get(server.base_url + "/props").json()
    assert chosen.source in props["chat_template"]
    assert chosen.user + "What is the capital of France?" in _apply(server, FIRST)


def test_a_second_turn_is_served_from_the_cache(mode: tuple[ServerProcess, Mode]):
    client = _client(mode[0])
    turn1 = client.chat.completions.create(model="m", messages=FIRST, max_tokens=16, temperature=0)
    kept = turn1.usage.prompt_tokens + turn1.usage.completion_tokens
    reply = {"role": "assistant", "content": turn1.choices[0].message.content}
    history = [*FIRST, reply, {"role": "user", "content": "And of Italy?"}]
    turn2 = client.chat.completions.create(model="m", messages=history, max_tokens=4)
    cached = turn2.usage.prompt_tokens_details.cached_tokens
    assert cached >= kept - 1, (cached, kept)  # (the reply's last token may not be in the KV)
    assert turn2.usage.prompt_tokens > kept


def test_tools_render_in_the_templates_own_format_or_the_generic_one(
    mode: tuple[ServerProcess, Mode],
):
    server, chosen = mode
    prompt = _apply(server, FIRST, tools=[WEATHER])
    if chosen.knows_tools:  # its own words around the tools in OpenAI's JSON
        assert "<tools>\n" + json.dumps(WEATHER) + "\n</tools>" in prompt
        assert GENERIC_TOOLS not in prompt
    else:
        assert GENERIC_TOOLS in prompt and '"name": "get_weather"' in prompt


@pytest.fixture(scope="module")
def hermes() -> Iterator[ServerProcess]:
    with ServerProcess(
        "-np", "1", "-c", "2048", "-n", "64", "--chat-template-file", str(HERMES)
    ) as srv:
        yield srv


def test_a_tool_loop_with_a_tools_template_is_one_growing_prefix(hermes: ServerProcess):
    """The call comes back parsed; the template renders it back as written, and the result turn
    (a `tool` message, rendered as the template says) extends the call turn in the cache."""
    client = _client(hermes)
    kw: dict[str, Any] = {"model": "m", "tools": [WEATHER]}
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    call_turn = client.chat.completions.create(
        messages=ask, tool_choice="required", temperature=0, **kw
    )
    message = call_turn.choices[0].message
    assert call_turn.choices[0].finish_reason == "tool_calls"
    call = message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    result = {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "sunny"}'}
    history = [*ask, message.model_dump(exclude_none=True), result]
    written = "\n".join(
        f'<tool_call>\n{{"name": "{c.function.name}", "arguments": {c.function.arguments}}}'
        "\n</tool_call>"
        for c in message.tool_calls
    )
    prompt = _apply(hermes, history, tools=[WEATHER])
    assert "<|im_start|>assistant\n" + written + "<|im_end|>\n" in prompt
    assert '<|im_start|>user\n<tool_response>\n{"sky": "sunny"}\n</tool_response>' in prompt
    answer = client.chat.completions.create(messages=history, max_tokens=4, **kw)
    kept = call_turn.usage.prompt_tokens + call_turn.usage.completion_tokens
    cached = answer.usage.prompt_tokens_details.cached_tokens
    assert cached >= kept - 1, (cached, kept)
    assert answer.usage.prompt_tokens > kept


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--chat-template", "nope"], "is not one of llama.cpp's built-in templates (bailing"),
        (["--chat-template-file", "/nonexistent/t.jinja"], "cannot be read"),
    ],
)
def test_a_bad_template_choice_stops_the_start_saying_why(flags: list[str], says: str):
    server = ServerProcess(*flags)
    try:
        with pytest.raises(RuntimeError, match="exited") as failed:
            server.start(timeout=60)
        assert says in str(failed.value)
    finally:
        server.stop()
