"""Tool calling on /v1/chat/completions through a real server, with the official
OpenAI SDK. The tiny model need not choose well: `required` and named tool choices make the
grammar write the call, so its arguments always parse and follow the schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.lib.server_process import ServerProcess
from tests.app.api.weather_tool import WEATHER

TIME = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "2", "-c", "2048", "-n", "128") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)


def _streamed_calls(client: openai.OpenAI, **kw: Any) -> tuple[list[dict], str | None, str]:
    """The calls of a streamed reply, accumulated from the deltas as the SDK's docs do."""
    calls: dict[int, dict] = {}
    reason, content = None, ""
    for chunk in client.chat.completions.create(stream=True, **kw):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = d.id or call["id"]
                call["name"] += (d.function.name or "") if d.function else ""
                call["arguments"] += (d.function.arguments or "") if d.function else ""
            reason = choice.finish_reason or reason
    return [calls[i] for i in sorted(calls)], reason, content


def test_required_tool_choice_gives_a_call_whose_arguments_follow_the_schema(
    client: openai.OpenAI,
):
    reply = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER, TIME], tool_choice="required", temperature=0
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name in ("get_weather", "get_time")
    args = json.loads(call.function.arguments)
    schema = (WEATHER if call.function.name == "get_weather" else TIME)["function"]["parameters"]
    assert jsonschema_rs.validator_for(schema).is_valid(args)


def test_a_named_tool_choice_calls_that_tool_streamed(client: openai.OpenAI):
    calls, reason, content = _streamed_calls(
        client,
        model="m",
        messages=ASK,
        tools=[TIME, WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
    )
    assert reason == "tool_calls" and content == ""
    assert len(calls) == 1 and calls[0]["name"] == "get_weather"
    assert calls[0]["id"].startswith("call_")
    assert isinstance(json.loads(calls[0]["arguments"])["city"], str)


def test_a_streamed_reply_with_tools_never_sends_empty_content(client: openai.OpenAI):
    """As without tools (and as llama-server's own test client checks): the first delta names
    the role with no content, and every content delta that follows holds text."""
    stream = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER], max_tokens=8, stream=True, temperature=0
    )
    deltas = [choice.delta for chunk in stream for choice in chunk.choices]
    assert deltas[0].role == "assistant" and deltas[0].content is None
    assert all(d.content is None or d.content != "" for d in deltas)


def test_tool_choice_none_answers_in_text(client: openai.OpenAI):
    reply = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=8
    )
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].finish_reason in ("stop", "length")


def test_a_tool_loop_is_one_growing_prefix(client: openai.OpenAI):
    """The result turn's prompt starts with every token of the call turn: prompt and call."""
    kw: dict[str, Any] = {"model": "m", "tools": [WEATHER]}
    call_turn = client.chat.completions.create(
        messages=ASK, tool_choice="required", temperature=0, **kw
    )
    message = call_turn.choices[0].message
    call = message.tool_calls[0]
    result = {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "sunny", "c": 21}'}
    history = [*ASK, message.model_dump(exclude_none=True), result]
    answer = client.chat.completions.create(messages=history, max_tokens=8, **kw)
    kept = call_turn.usage.prompt_tokens + call_turn.usage.completion_tokens
    cached = answer.usage.prompt_tokens_details.cached_tokens
    assert cached >= kept - 1, (cached, kept)  # (the reply's last token may not be in the KV)
    assert answer.usage.prompt_tokens > kept


def test_bad_tool_requests_are_clear_400s(server: ServerProcess):
    url = server.base_url + "/v1/chat/completions"
    cases = [
        ({"tool_choice": "required"}, "tool_choice", "no tools were given"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
            "not one of the tools",
        ),
        ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name", "used by two tools"),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name!"}}]},
            "tools.0.function.name",
            "should match pattern",
        ),
        (
            {
                "tools": [WEATHER],
                "tool_choice": "required",
                "response_format": {"type": "json_object"},
            },
            "tool_choice",
            "without response_format",
        ),
    ]
    for extra, param, words in cases:
        r = httpx.post(url, json={"messages": ASK, **extra})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["param"] == param and words in error["message"], error


# --- arguments always follow the schema (hypothesis over small schemas) ---------------------------

_scalar = st.one_of(
    st.just({"type": "string", "maxLength": 12}),
    st.just({"type": "integer"}),
    st.just({"type": "boolean"}),
    st.just({"type": "number"}),
    st.lists(
        st.sampled_from(["red", "green", "blue", "x y"]), min_size=1, max_size=3, unique=True
    ).map(lambda v: {"type": "string", "enum": v}),
)


@st.composite
def _schemas(draw: st.DrawFn) -> dict:
    names = draw(
        st.lists(st.sampled_from(["a", "city", "n", "flag", "when"]), max_size=3, unique=True)
    )
    props = {n: draw(_scalar) for n in names}
    required = [n for n in names if draw(st.booleans())]
    return {"type": "object", "properties": props, "required": required}


@pytest.mark.slow
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(schema=_schemas(), streamed=st.booleans())
def test_forced_arguments_always_validate(client: openai.OpenAI, schema: dict, streamed: bool):
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    kw: dict[str, Any] = {"model": "m", "messages": ASK, "tools": [tool], "tool_choice": "required"}
    if streamed:
        calls, reason, _ = _streamed_calls(client, **kw)
    else:
        reply = client.chat.completions.create(**kw)
        reason = reply.choices[0].finish_reason
        calls = [
            {"name": c.function.name, "arguments": c.function.arguments}
            for c in reply.choices[0].message.tool_calls or []
        ]
    assert reason == "tool_calls" and calls
    for call in calls:
        assert call["name"] == "f"
        assert jsonschema_rs.validator_for(schema).is_valid(json.loads(call["arguments"]))
