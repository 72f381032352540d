"""API conformance through a real server: what a newcomer to the API tripped over, each
test named after a finding (each failed before its fix)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from bench.lib.server_process import ServerProcess
from tests.eventually import eventually

LIMIT = 200_000  # --max-body-bytes of this server


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = ("-np", "2", "-c", "1024", "-n", "24", "--max-body-bytes", str(LIMIT))
    with ServerProcess(*args) as srv:
        yield srv


def post(server: ServerProcess, path: str, body: object, **kw) -> httpx.Response:
    return httpx.post(server.base_url + path, json=body, timeout=120, **kw)


def error_of(r: httpx.Response) -> dict:
    return r.json()["error"]


HELLO = [{"role": "user", "content": "Say hello."}]


# --- routes: 404 / 405 / the UI / models.retrieve ---------------------------------------------


def test_unknown_post_path_is_a_json_404_not_405(server: ServerProcess):
    r = post(server, "/v1/no-such-thing", {})
    assert r.status_code == 404
    assert error_of(r)["code"] == "not_found"


def test_wrong_method_on_a_known_route_is_405_not_404(server: ServerProcess):
    r = httpx.get(server.base_url + "/v1/chat/completions")
    assert r.status_code == 405
    assert "POST" in r.headers["allow"]
    assert "GET" in error_of(r)["message"]


def test_the_ui_is_served_for_get_of_its_own_paths_only(server: ServerProcess):
    page = httpx.get(server.base_url + "/")
    assert page.status_code == 200 and "html" in page.headers["content-type"]
    assert httpx.get(server.base_url + "/index.html").status_code == 200
    api = httpx.get(server.base_url + "/v1/unknown")
    assert api.status_code == 404 and error_of(api)["type"] == "not_found_error"


def test_models_retrieve_works_with_the_openai_sdk(server: ServerProcess):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    name = client.models.list().data[0].id
    assert client.models.retrieve(name).id == name
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


# --- response_format, tools --------------------------------------------------------------------


def test_response_format_json_schema_is_enforced_by_the_grammar(server: ServerProcess):
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["answer"],
    }
    body = {
        "messages": [{"role": "user", "content": "Is the sky blue?"}],
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    }
    r = post(server, "/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert json.loads(choice["message"]["content"])["answer"] in ("yes", "no")


def test_llama_servers_top_level_json_schema_is_enforced(server: ServerProcess):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    body = {"prompt": "A number:", "temperature": 0, "max_tokens": 20, "json_schema": schema}
    r = post(server, "/v1/completions", body)
    assert r.status_code == 200, r.text
    assert isinstance(json.loads(r.json()["choices"][0]["text"])["n"], int)
    both = post(server, "/v1/completions", {**body, "grammar": 'root ::= "x"'})
    assert both.status_code == 400 and "not both" in error_of(both)["message"]


def test_two_assistant_messages_at_the_end_are_refused_as_llama_server_does(
    server: ServerProcess,
):
    messages = [
        *HELLO,
        {"role": "assistant", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]
    r = post(server, "/v1/chat/completions", {"messages": messages, "max_tokens": 2})
    assert r.status_code == 400
    assert "annot have 2 or more assistant messages at the end" in error_of(r)["message"]
    assert error_of(r)["param"] == "messages"
    one = post(server, "/v1/chat/completions", {"messages": messages[:-1], "max_tokens": 2})
    assert one.status_code == 200, one.text  # one at the end: a reply to go on from


def test_response_format_json_object_starts_an_object(server: ServerProcess):
    body = {"messages": HELLO, "temperature": 0, "response_format": {"type": "json_object"}}
    r = post(server, "/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].lstrip().startswith("{")
    bad = {**body, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}
    refused = post(server, "/v1/chat/completions", bad)
    assert refused.status_code == 400 and error_of(refused)["param"] == "response_format"


def test_tools_where_a_route_takes_none_are_refused_with_a_400_that_says_so(
    server: ServerProcess,
):
    # Chat completions take tools (tests/app/api/openai/test_tool_calls.py); text
    # completions do not, and the legacy `functions` is refused everywhere.
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    r = post(server, "/v1/completions", {"prompt": "Hi", "tools": [tool]})
    assert r.status_code == 400
    assert error_of(r)["param"] == "tools" and "not supported" in error_of(r)["message"]
    legacy = post(server, "/v1/chat/completions", {"messages": HELLO, "functions": [tool]})
    assert legacy.status_code == 400 and error_of(legacy)["param"] == "functions"


# --- error messages -----------------------------------------------------------------------------


def test_validation_errors_are_plain_words_with_the_right_param(server: ServerProcess):
    r = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]})
    err = error_of(r)
    assert r.status_code == 400
    assert err["param"] == "messages.0.content"
    assert "messages[0].content" in err["message"] and "str" not in err["message"].split(":")[0]
    sid = post(server, "/v1/sessions", {}).json()["id"]
    r = post(server, f"/v1/sessions/{sid}/messages", {"content": "a\x00b"})
    assert error_of(r)["param"] == "content"
    assert "function-after" not in error_of(r)["message"]


def test_an_empty_body_names_the_required_field(server: ServerProcess):
    r = httpx.post(
        server.base_url + "/v1/chat/completions",
        content=b"",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400
    assert error_of(r)["param"] == "messages"
    assert "empty" in error_of(r)["message"] and "Field required" not in error_of(r)["message"]


def test_a_too_long_completions_prompt_blames_prompt(server: ServerProcess):
    r = post(server, "/v1/completions", {"prompt": "word " * 600})
    assert r.status_code == 400
    assert error_of(r)["code"] == "exceed_context_size_error"
    assert error_of(r)["param"] == "prompt"
    # llama-server's type and figures, which its clients read
    assert error_of(r)["type"] == "exceed_context_size_error"
    assert error_of(r)["n_prompt_tokens"] > error_of(r)["n_ctx"] > 0


# --- limits ------------------------------------------------------------------------------------


def test_a_body_over_the_limit_gets_413_before_it_is_sent(server: ServerProcess):
    # Only the headers go out: the 413 must come without the server waiting for the body.
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 30000000\r\n\r\n"
        )
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 413")
    # A chunked body (no length) is counted as it comes.
    big = {"messages": [{"role": "user", "content": "x" * LIMIT}]}
    r = httpx.post(
        server.base_url + "/v1/chat/completions",
        content=iter([json.dumps(big).encode()]),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"
    assert httpx.get(server.base_url + "/health").status_code == 200


def test_n_predict_is_the_default_of_max_tokens_as_in_llama_server(server: ServerProcess):
    for extra, want in (({}, 24), ({"max_tokens": 30}, 30), ({"n_predict": 28}, 28)):
        body = {"prompt": "Once upon a time", "ignore_eos": True, **extra}
        r = post(server, "/v1/completions", body)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == want


# --- /slots, sessions, logs -------------------------------------------------------------------


def test_slots_show_live_sessions_and_unix_last_used(server: ServerProcess):
    sid = post(server, "/v1/sessions", {}).json()["id"]
    r = post(server, f"/v1/sessions/{sid}/messages", {"content": "Hi", "max_tokens": 2})
    assert r.status_code == 200, r.text
    slots = httpx.get(server.base_url + "/slots").json()
    assert sid in [s["session"] for s in slots]
    used = [s["last_used"] for s in slots if s["session"] == sid][0]
    assert abs(used - time.time()) < 3600  # a Unix time, not a monotonic clock
    assert httpx.delete(f"{server.base_url}/v1/sessions/{sid}").status_code == 200
    assert sid not in [s["session"] for s in httpx.get(server.base_url + "/slots").json()]


def test_a_chat_with_an_unknown_session_id_is_refused(server: ServerProcess):
    body = {"messages": HELLO, "max_tokens": 2, "session_id": "f" * 32}
    r = post(server, "/v1/chat/completions", body)
    assert r.status_code == 404 and error_of(r)["param"] == "session_id"
    r = post(
        server, "/v1/chat/completions", {**body, "session_id": None}, headers={"X-Session-Id": "x"}
    )
    assert r.status_code == 404
    assert "x" not in [s["session"] for s in httpx.get(server.base_url + "/slots").json()]


def test_a_cancelled_request_logs_its_slot_and_tokens(server: ServerProcess):
    body = {"prompt": "Count: one, two,", "ignore_eos": True, "max_tokens": 20, "stream": True}
    with httpx.stream("POST", server.base_url + "/v1/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["text"]:
                break  # one token came: go away

    def cancelled_lines() -> list[dict]:
        return [
            json.loads(x[x.index("{") :])
            for x in server.log(200_000).splitlines()
            if '"event": "request"' in x and '"outcome": "cancelled"' in x
        ]

    lines = eventually(cancelled_lines, "a log line for the cancelled request")
    assert lines[-1]["slot"] >= 0
    assert lines[-1]["completion_tokens"] >= 1


def test_a_grammar_llama_cpp_cannot_parse_is_a_400(server: ServerProcess):
    r = post(server, "/v1/chat/completions", {"messages": HELLO, "grammar": "root ::= ("})
    assert r.status_code == 400
    assert "grammar" in error_of(r)["message"]
    ok = post(server, "/v1/chat/completions", {"messages": HELLO, "grammar": 'root ::= "yes"'})
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "yes"


# --- llama-server's shapes -----------------------------------------------------------------------


def test_the_first_chunk_has_null_content_and_every_object_a_fingerprint(server: ServerProcess):
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": True}
    with httpx.stream("POST", server.base_url + "/v1/chat/completions", json=body) as r:
        chunks = [
            json.loads(line[6:])
            for line in r.iter_lines()
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert all(c["system_fingerprint"].startswith("kvchat-") for c in chunks)
    whole = post(server, "/v1/chat/completions", {**body, "stream": False}).json()
    assert whole["system_fingerprint"] == chunks[0]["system_fingerprint"]


def test_slots_carry_llama_servers_fields(server: ServerProcess):
    slots = httpx.get(server.base_url + "/slots").json()
    assert [s["id"] for s in slots] == [0, 1]
    for s in slots:
        assert s["n_ctx"] == 512  # -c 1024 over 2 slots
        assert s["is_processing"] is (s["state"] == "processing")
        assert s["id_task"] == s["task_id"]
