"""The Responses API on top of sessions, through a real server with the tiny test
projector, with the official OpenAI SDK, streamed and not."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import jsonschema_rs
import openai
import pytest
from PIL import Image

from bench.lib.server_process import ROOT, ServerProcess
from tests.app.api.keyed_server import KeyedServer
from tests.app.api.weather_tool import WEATHER_FLAT as WEATHER

YN = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
YES_NO = {"format": {"type": "json_schema", "name": "yn", "schema": YN}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    mmproj = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(mmproj)], check=True, capture_output=True)
    with ServerProcess("-np", "2", "-c", "4096", "--mmproj", str(mmproj)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)


def test_previous_response_id_reports_the_previous_turn_as_cached(client: openai.OpenAI):
    first = client.responses.create(
        model="m",
        instructions="You are brief.",
        input="Name a fruit.",
        max_output_tokens=8,
        temperature=0,
    )
    assert first.id.startswith("resp_") and first.status in ("completed", "incomplete")
    assert first.output[0].type == "message" and first.output_text
    second = client.responses.create(
        model="m", previous_response_id=first.id, input="And a color?", max_output_tokens=8
    )
    assert second.previous_response_id == first.id
    kept = first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens >= kept - 1
    assert second.usage.input_tokens > kept


def test_stream_gives_the_event_sequence_and_the_stored_response(client: openai.OpenAI):
    kinds, text, final = [], "", None
    stream = client.responses.create(
        model="m", input="Say hello.", max_output_tokens=8, stream=True
    )
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type in ("response.completed", "response.incomplete"):
            final = event.response
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_item.added" in kinds and "response.output_text.done" in kinds
    assert final is not None and final.output_text == text
    assert [e for e in kinds if e.startswith("response.") and e.count(".") == 1][-1] in (
        "response.completed",
        "response.incomplete",
    )
    # The SDK's helper wants `response.completed`: a reply the grammar ends (one cut by
    # max_output_tokens ends in `response.incomplete`, as OpenAI's does).
    with client.responses.stream(model="m", input="Is it?", text=YES_NO, max_output_tokens=32) as s:
        helper = s.get_final_response()
    assert helper.status == "completed"
    stored = client.responses.retrieve(helper.id)
    assert stored.output_text == helper.output_text
    assert stored.usage.output_tokens == helper.usage.output_tokens


def test_input_tokens_and_llama_server_s_stream_telemetry(
    server: ServerProcess, client: openai.OpenAI
):
    url, body = server.base_url, {"instructions": "You are brief.", "input": "Name a fruit."}
    counted = httpx.post(url + "/v1/responses/input_tokens", json=body, timeout=60).json()
    assert counted["object"] == "response.input_tokens"
    reply = client.responses.create(model="m", store=False, max_output_tokens=2, **body)
    assert reply.usage.input_tokens == counted["input_tokens"]
    # llama-server's path without /v1, and its telemetry: the prompt's progress, the timings
    # on each text delta and on the last event.
    ask = {**body, "stream": True, "max_output_tokens": 4}
    ask |= {"timings_per_token": True, "return_progress": True}
    with httpx.stream("POST", url + "/responses", json=ask, timeout=60) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line[6:]) for line in lines]
    progress = [e for e in events if "prompt_progress" in e]
    assert [e["type"] for e in progress] == ["response.in_progress"]
    assert progress[0]["prompt_progress"]["total"] == counted["input_tokens"]
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert deltas and all(e["timings"]["predicted_n"] >= 1 for e in deltas)
    assert (
        events[-1]["timings"]["prompt_n"] + events[-1]["timings"]["cache_n"]
        == (counted["input_tokens"])
    )


def test_text_format_json_schema_goes_through_the_grammar(client: openai.OpenAI):
    reply = client.responses.create(
        model="m", input="Is the sky blue?", text=YES_NO, max_output_tokens=32
    )
    assert reply.status == "completed"
    assert jsonschema_rs.validator_for(YN).is_valid(json.loads(reply.output_text))


@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_loop_over_previous_response_id(client: openai.OpenAI, streamed: bool):
    kw = {"model": "m", "tools": [WEATHER], "max_output_tokens": 64, "parallel_tool_calls": False}
    ask = "What is the weather in Paris?"
    if streamed:
        with client.responses.stream(input=ask, tool_choice="required", **kw) as s:
            call_turn = s.get_final_response()
    else:
        call_turn = client.responses.create(input=ask, tool_choice="required", **kw)
    calls = [o for o in call_turn.output if o.type == "function_call"]
    assert (
        len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")
    )
    params = WEATHER["parameters"]
    assert jsonschema_rs.validator_for(params).is_valid(json.loads(calls[0].arguments))
    result = {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}
    answer = client.responses.create(
        previous_response_id=call_turn.id, input=[result], **{**kw, "max_output_tokens": 6}
    )
    kept = call_turn.usage.input_tokens + call_turn.usage.output_tokens
    assert answer.usage.input_tokens_details.cached_tokens >= kept - 1
    # The stored call keeps its ids: retrieving the response shows what was sent.
    again = client.responses.retrieve(call_turn.id)
    assert [o.call_id for o in again.output if o.type == "function_call"] == [calls[0].call_id]


def test_an_input_image(client: openai.OpenAI):
    im = Image.new("RGB", (64, 64))
    im.putdata([((x * 5) % 256, (x * 3) % 256, 7) for x in range(64 * 64)])
    buf = io.BytesIO()
    im.save(buf, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    content = [
        {"type": "input_text", "text": "What is in the picture?"},
        {"type": "input_image", "image_url": url},
    ]
    first = client.responses.create(
        model="m", input=[{"role": "user", "content": content}], max_output_tokens=6
    )
    assert first.usage.input_tokens > 64  # the image's tokens
    second = client.responses.create(
        model="m", previous_response_id=first.id, input="Describe it again.", max_output_tokens=4
    )
    assert second.usage.input_tokens_details.cached_tokens > 64


def test_continuing_an_older_response_branches_the_conversation(client: openai.OpenAI):
    first = client.responses.create(model="m", input="Count: one", max_output_tokens=4)
    later = client.responses.create(
        model="m", previous_response_id=first.id, input="two", max_output_tokens=4
    )
    branch = client.responses.create(
        model="m", previous_response_id=first.id, input="deux", max_output_tokens=4
    )
    assert branch.id != later.id
    kept = first.usage.input_tokens + first.usage.output_tokens
    assert branch.usage.input_tokens_details.cached_tokens >= kept - 1
    assert client.responses.retrieve(later.id).previous_response_id == first.id


def test_delete_and_store_false(client: openai.OpenAI):
    reply = client.responses.create(model="m", input="Hi", max_output_tokens=4)
    deleted = client.responses.delete(reply.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(reply.id)
    unstored = client.responses.create(model="m", input="Hi", max_output_tokens=4, store=False)
    assert unstored.output_text is not None
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_bad_requests_are_clear_400s_and_404s(server: ServerProcess, client: openai.OpenAI):
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model="m", input="x", previous_response_id="resp_nope_1")
    assert e.value.body["param"] == "previous_response_id"
    url = server.base_url + "/v1/responses"
    web = httpx.post(url, json={"input": "x", "tools": [{"type": "web_search"}]})
    assert web.status_code == 400 and web.json()["error"]["param"] == "tools[0].type"
    assert "only function tools" in web.json()["error"]["message"]
    empty = httpx.post(url, json={"input": []})
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "input"


def test_tenants_own_their_responses(keyed: KeyedServer):
    body = {"input": "Hi", "max_output_tokens": 4}
    made = httpx.post(keyed.url + "/v1/responses", json=body, headers=keyed.auth("alice"))
    assert made.status_code == 200, made.text
    rid = made.json()["id"]
    url = f"{keyed.url}/v1/responses/{rid}"
    assert httpx.get(url, headers=keyed.auth("alice")).status_code == 200
    assert httpx.get(url, headers=keyed.auth("bob")).status_code == 404
    assert httpx.delete(url, headers=keyed.auth("bob")).status_code == 404
    cont = {**body, "previous_response_id": rid}
    other = httpx.post(keyed.url + "/v1/responses", json=cont, headers=keyed.auth("bob"))
    assert other.status_code == 404
