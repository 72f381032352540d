"""One request that would take the server's memory or its engine thread: refused in the API's
own shape before any of its work is queued, while a chat on another key is served meanwhile;
what is not refused (a huge /tokenize answer, long logit bias lists) is served without holding
the event loop or the engine thread.

The payloads are bench/workloads/hostile_requests.py's; `python -m bench.resource_limits`
measures what each costs the server (time, RSS).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.lib.server_process import ROOT, ServerProcess, make_key
from bench.workloads import hostile_requests as hostile
from tests.app.api.keyed_server import KeyedServer

TIMEOUT = 60.0  # a refusal comes long before this: the bound says only that nothing hung


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    return str(out)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, mmproj: str) -> Iterator[KeyedServer]:
    """The limits at their defaults; mallory attacks, alice chats meanwhile."""
    data = tmp_path_factory.mktemp("limits")
    keys = {"mallory": make_key(data, "mallory"), "alice": make_key(data, "alice")}
    args = ("-np", "2", "-c", "8192", "--data-dir", str(data), "--mmproj", mmproj)
    args += ("--image-max-pixels", "262144", "--doc-prefill-tokens", "0")
    with ServerProcess(*args) as srv:
        yield KeyedServer(srv, data, keys)


def send(server: KeyedServer, attack: hostile.Hostile, who: str = "mallory") -> httpx.Response:
    url, headers = server.url + attack.path.format(**attack.extra), server.auth(who)
    if attack.file is not None:
        return httpx.post(url, files={"file": attack.file}, headers=headers, timeout=TIMEOUT)
    return httpx.post(url, json=attack.json, headers=headers, timeout=TIMEOUT)


def alice_chats(server: KeyedServer) -> httpx.Response:
    body = {"messages": hostile.HI, "max_tokens": 4, "temperature": 0}
    return httpx.post(
        server.url + "/v1/chat/completions",
        json=body,
        headers=server.auth("alice"),
        timeout=TIMEOUT,
    )


def meanwhile(server: KeyedServer, attack: hostile.Hostile) -> httpx.Response:
    """The attack, with alice's chat sent at the same moment; alice is served, and the server
    answers after it too."""
    with ThreadPoolExecutor(2) as pool:
        mallory = pool.submit(send, server, attack)
        alice = pool.submit(alice_chats, server)
        reply, other = mallory.result(), alice.result()
    assert other.status_code == 200, other.text
    assert other.json()["choices"][0]["message"]["content"] is not None
    assert httpx.get(server.url + "/health", timeout=TIMEOUT).status_code == 200
    return reply


def refused(reply: httpx.Response, status: int, param: str | None, *words: str) -> str:
    """The refusal's message, checked in the route's shape: OpenAI's (with `param`) or
    llama-server's native one (the message names the field)."""
    assert reply.status_code == status, reply.text[:500]
    error = reply.json()["error"]
    message = error["message"]
    if "param" in error or param is None:
        assert error.get("param") == param, error
    else:  # llama-server's shape: {"code": status, "message", "type"}
        assert error["code"] == status and message.startswith(f"{param}:"), error
    for word in words:
        assert word in message, message
    return message


@pytest.mark.parametrize("n", [200_000, 3_000_000_000])
def test_a_schema_whose_bounds_are_written_out_in_full_is_refused(server: KeyedServer, n: int):
    reply = meanwhile(server, hostile.huge_max_length(n))
    refused(reply, 400, "response_format", f"$.maxLength is {n}", "--grammar-max-repeat")


def test_a_tool_schema_of_a_million_items_is_refused(server: KeyedServer):
    reply = meanwhile(server, hostile.huge_min_items_tool(1_000_000))
    param = "tools[0].function.parameters"
    refused(reply, 400, param, "$.properties.xs.minItems is 1000000", "--grammar-max-repeat")


def test_a_pattern_of_a_million_repetitions_is_refused(server: KeyedServer):
    reply = meanwhile(server, hostile.huge_pattern(1_000_000))
    refused(reply, 400, "json_schema", "$.pattern is 1000000", "--grammar-max-repeat")


def test_a_grammar_nested_past_the_engine_threads_stack_is_refused(server: KeyedServer):
    reply = meanwhile(server, hostile.deep_grammar(49_000))
    refused(reply, 400, "grammar", "nested more than 1024 deep")


def test_a_grammar_whose_rules_fan_out_exponentially_is_refused(server: KeyedServer):
    reply = meanwhile(server, hostile.fan_out_grammar(24))
    refused(reply, 400, "grammar", "can begin 16777216 ways")


def test_a_grammar_llama_cpp_would_recurse_in_without_end_is_refused(server: KeyedServer):
    reply = meanwhile(server, hostile.left_recursive_grammar())
    refused(reply, 400, "grammar", "a rule begins with itself (left recursion)")


def test_too_many_images_are_refused_before_any_is_decoded(server: KeyedServer):
    reply = meanwhile(server, hostile.many_images(17))
    refused(reply, 400, "messages", "holds 17 images", "at most 16", "--image-max-count")
    # The token-counting route reads the same images, outside the queue's limit.
    body = hostile.many_images(17).json
    count = httpx.post(
        server.url + "/v1/chat/completions/input_tokens",
        json=body,
        headers=server.auth("mallory"),
        timeout=TIMEOUT,
    )
    refused(count, 400, "messages", "--image-max-count")
    ok = send(server, hostile.many_images(2))  # fewer are described as before
    assert ok.status_code == 200, ok.text


def test_a_session_message_with_too_many_images_stores_nothing(server: KeyedServer):
    headers = server.auth("mallory")
    sid = httpx.post(server.url + "/v1/sessions", json={}, headers=headers).json()["id"]
    content = [{"type": "text", "text": "Describe."}, *hostile.image_parts(17)]
    attack = hostile.Hostile(f"/v1/sessions/{sid}/messages", {"content": content, "max_tokens": 2})
    refused(meanwhile(server, attack), 400, "content", "--image-max-count")
    stored = httpx.get(server.url + f"/v1/sessions/{sid}", headers=headers).json()
    assert stored["messages"] == []


@pytest.mark.parametrize("n", [17, 20_000])
def test_a_completion_of_too_many_prompts_is_refused(server: KeyedServer, n: int):
    reply = meanwhile(server, hostile.many_prompts(n))
    refused(reply, 400, "prompt", f"has {n} prompts", "--max-prompts")
    fine = send(server, hostile.many_prompts(3))
    assert fine.status_code == 200 and [r["index"] for r in fine.json()] == [0, 1, 2]


def _collection(server: KeyedServer, name: str) -> str:
    r = httpx.post(
        server.url + "/v1/collections", json={"name": name}, headers=server.auth("mallory")
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _documents(server: KeyedServer, collection: str) -> list:
    path = f"/v1/collections/{collection}/documents"
    return httpx.get(server.url + path, headers=server.auth("mallory")).json()["data"]


def test_a_docx_that_unpacks_to_gigabytes_is_refused_unopened(server: KeyedServer):
    attack = hostile.zip_bomb_docx(256 << 20)
    attack.extra["collection"] = collection = _collection(server, "bombs")
    reply = meanwhile(server, attack)
    limit = "the limit is 67108864 (--doc-max-unpacked-bytes)"
    refused(reply, 413, "file", "unpacks to 2692", limit)
    assert _documents(server, collection) == []


def test_a_pdf_of_too_many_pages_is_refused(server: KeyedServer):
    attack = hostile.many_pages_pdf(2001)
    attack.extra["collection"] = collection = _collection(server, "pages")
    reply = meanwhile(server, attack)
    refused(reply, 413, "file", "has 2001 pages", "--doc-max-pages")
    assert _documents(server, collection) == []


def test_a_huge_tokenize_answer_with_pieces_is_served_whole(server: KeyedServer):
    attack = hostile.big_tokenize(2 << 20)
    reply = meanwhile(server, attack)
    assert reply.status_code == 200, reply.text[:300]
    pieces = reply.json()["tokens"]
    plain = send(server, hostile.Hostile("/tokenize", {"content": attack.json["content"]}))
    assert [p["id"] for p in pieces] == plain.json()["tokens"]
    text = "".join(p["piece"] for p in pieces[:50] if isinstance(p["piece"], str))
    assert attack.json["content"].startswith(text)


def test_long_logit_bias_lists_and_texts_are_served(server: KeyedServer):
    reply = meanwhile(server, hostile.long_bias_list(300_000))
    assert reply.status_code == 200, reply.text[:300]
    # Each token once, its biases added up (as llama.cpp adds them): token 0 is 7 times in it.
    biases = reply.json()["generation_settings"]["logit_bias"]
    assert len(biases) == 49152 and biases[0] == {"bias": 3.5, "token": 0}
    texts = meanwhile(server, hostile.long_bias_text(1 << 20))
    assert texts.status_code == 200, texts.text[:300]
    biases = texts.json()["generation_settings"]["logit_bias"]  # a few words, many times each
    assert 0 < len(biases) < 20 and all(b["bias"] <= -1.0 for b in biases)


def test_n_choices_are_made_from_one_prompt_with_images_and_one_grammar(server: KeyedServer):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    content = [{"type": "text", "text": "A number?"}, *hostile.image_parts(2)]
    body = hostile.chat(
        messages=[{"role": "user", "content": content}],
        response_format=hostile.schema_format(schema),
        n=3,
        temperature=1.0,
        max_tokens=24,
    )
    reply = send(server, hostile.Hostile("/v1/chat/completions", body))
    assert reply.status_code == 200, reply.text
    choices = reply.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    for choice in choices:
        if choice["finish_reason"] == "stop":  # the grammar ended it: whole JSON
            assert isinstance(json.loads(choice["message"]["content"])["a"], int)
