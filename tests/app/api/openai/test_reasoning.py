"""Reasoning through a real server: a reply's `<think>` block comes back as
`reasoning_content`, in whole replies and streamed apart, per --reasoning-format and the
request's `reasoning_format`; a session stores it apart and leaves it out of the next prompt
as the template does (SmolLM2's shows only content).

The packaged model does not think on its own: a grammar makes it write a thought and an answer.
Its template knows no reasoning, so `auto` (the default) leaves its replies as content, as
llama-server's template analysis does; the `server` fixture splits them with `deepseek`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from bench.lib.server_process import ServerProcess

GRAMMAR = 'root ::= "<think>\\nI think" [a-z ]{1,12} "\\n</think>\\n\\nAnswer:" [a-z ]{1,12}'
ASK = [{"role": "user", "content": "What is two plus two?"}]
GREEDY: dict[str, Any] = {"temperature": 0, "max_tokens": 40, "grammar": GRAMMAR}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "1", "-c", "2048", "--reasoning-format", "deepseek") as srv:
        yield srv


def chat(server: ServerProcess, **body: Any) -> dict[str, Any]:
    r = httpx.post(
        server.base_url + "/v1/chat/completions",
        json={"messages": ASK, **GREEDY, **body},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]


def test_the_thought_comes_apart_from_the_answer(server: ServerProcess) -> None:
    message = chat(server)
    assert message["reasoning_content"].startswith("I think")
    assert message["content"].startswith("Answer:")
    assert "<think>" not in message["content"] and "</think>" not in message["content"]


def streamed(server: ServerProcess, grammar: str) -> list[tuple[str, str]]:
    """(kind, piece) of each delta of a streamed reply, read with the official SDK."""
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="m", messages=ASK, stream=True, temperature=0, max_tokens=40,
        extra_body={"grammar": grammar},
    )  # fmt: skip
    pieces = []
    for chunk in stream:
        for choice in chunk.choices:
            thought = (choice.delta.model_extra or {}).get("reasoning_content")
            if thought:
                pieces.append(("reasoning", thought))
            if choice.delta.content:
                pieces.append(("content", choice.delta.content))
    return pieces


def joined(pieces: list[tuple[str, str]], kind: str) -> str:
    return "".join(p for k, p in pieces if k == kind)


def test_a_stream_sends_the_thought_first_then_the_answer(server: ServerProcess) -> None:
    pieces = streamed(server, GRAMMAR)
    kinds = [k for k, _ in pieces]
    assert kinds == sorted(kinds, key=lambda k: k == "content")  # every thought before the answer
    assert "reasoning" in kinds and "content" in kinds
    whole = chat(server)
    assert (joined(pieces, "reasoning"), joined(pieces, "content")) == (
        whole["reasoning_content"],
        whole["content"],
    )


def test_format_none_leaves_the_tags_in_the_content(server: ServerProcess) -> None:
    message = chat(server, reasoning_format="none")
    assert message["content"].startswith("<think>\nI think")
    assert "reasoning_content" not in message


def test_format_legacy_keeps_the_tags_and_fills_reasoning(server: ServerProcess) -> None:
    message = chat(server, reasoning_format="deepseek-legacy")
    assert message["content"].startswith("<think>\nI think")
    assert message["reasoning_content"].startswith("I think")


def test_a_bad_reasoning_field_is_a_clear_400(server: ServerProcess) -> None:
    for body, param in [
        ({"reasoning_format": "loud"}, "reasoning_format"),
        ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs"),
    ]:
        r = httpx.post(
            server.base_url + "/v1/chat/completions", json={"messages": ASK, **body}, timeout=60
        )
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == param


def test_a_session_stores_the_thought_apart_and_leaves_it_out_of_the_next_prompt(
    server: ServerProcess,
) -> None:
    base = server.base_url
    sid = httpx.post(f"{base}/v1/sessions", json={}, timeout=30).json()["id"]
    turn = {"content": ASK[0]["content"], **GREEDY}
    r = httpx.post(f"{base}/v1/sessions/{sid}/messages", json=turn, timeout=120)
    assert r.status_code == 200, r.text
    reply = r.json()["choices"][0]["message"]
    stored = httpx.get(f"{base}/v1/sessions/{sid}", timeout=30).json()["messages"][-1]
    assert stored["reasoning_content"] == reply["reasoning_content"]
    assert stored["content"] == reply["content"] and "<think>" not in stored["content"]

    nxt = {"content": "And three plus three?", "max_tokens": 4, "temperature": 0}
    r = httpx.post(f"{base}/v1/sessions/{sid}/messages", json=nxt, timeout=120)
    second = r.json()["usage"]["prompt_tokens"]
    history = [*ASK, {"role": "assistant", "content": reply["content"]}]
    history.append({"role": "user", "content": nxt["content"]})
    thought = "<think>\n" + reply["reasoning_content"] + "\n</think>\n\n" + reply["content"]
    with_thought = [*history[:1], {"role": "assistant", "content": thought}, history[-1]]
    assert second == _input_tokens(server, history)  # the template shows content only
    assert second < _input_tokens(server, with_thought)


def _input_tokens(server: ServerProcess, messages: list[dict[str, Any]]) -> int:
    r = httpx.post(
        server.base_url + "/v1/chat/completions/input_tokens",
        content=json.dumps({"messages": messages}),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return r.json()["input_tokens"]


def test_auto_streams_a_template_without_reasoning_as_it_comes() -> None:
    """A reply's first blank line is the first delta: nothing waits to see whether `<think>`
    follows (a stream's first token would otherwise arrive a decode step late), and `<think>`
    itself stays content where the template knows no reasoning."""
    with ServerProcess("-np", "1", "-c", "1024") as srv:
        pieces = streamed(srv, 'root ::= "\\n\\nAnswer:" [a-z ]{1,12}')
        message = chat(srv)
    assert pieces[0][0] == "content" and pieces[0][1].strip() == "", pieces
    assert message["content"].startswith("<think>") and "reasoning_content" not in message


def test_the_server_flag_sets_the_default_format() -> None:
    with ServerProcess("-np", "1", "-c", "1024", "--reasoning-format", "none") as srv:
        r = httpx.post(
            srv.base_url + "/v1/chat/completions",
            json={"messages": ASK, **GREEDY},
            timeout=120,
        )
        message = r.json()["choices"][0]["message"]
    assert message["content"].startswith("<think>") and "reasoning_content" not in message


THINKING = Path(__file__).with_name("thinking.jinja")  # opens a thought in the prompt
ANSWER = 'root ::= "Answer:" [a-z ]{1,12}'
# A thought and an answer, for a prompt that opened the thought already.
OPENED = 'root ::= "I think" [a-z ]{1,12} "\\n</think>\\n\\nAnswer:" [a-z ]{1,12}'


@pytest.fixture(scope="module")
def thinking() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "1", "-c", "2048", "--chat-template-file", str(THINKING)) as srv:
        yield srv


def test_a_thought_the_template_opened_streams_apart(thinking: ServerProcess) -> None:
    pieces = streamed(thinking, OPENED)
    kinds = [k for k, _ in pieces]
    assert kinds == sorted(kinds, key=lambda k: k == "content")
    reasoning, content = joined(pieces, "reasoning"), joined(pieces, "content")
    assert reasoning.startswith("I think") and content.startswith("Answer:")
    whole = chat(thinking, grammar=OPENED)
    assert (reasoning, content) == (whole["reasoning_content"], whole["content"])


def test_enable_thinking_false_closes_the_thought_in_the_prompt(thinking: ServerProcess) -> None:
    opened = chat(thinking, grammar=ANSWER)
    assert opened["reasoning_content"].startswith("Answer:") and opened["content"] == ""
    kwargs = {"chat_template_kwargs": {"enable_thinking": False}}
    closed = chat(thinking, grammar=ANSWER, **kwargs)
    assert closed["content"].startswith("Answer:") and "reasoning_content" not in closed


def test_reasoning_off_is_enable_thinking_false() -> None:
    flags = ("--chat-template-file", str(THINKING), "--reasoning", "off")
    with ServerProcess("-np", "1", "-c", "1024", *flags) as srv:
        message = chat(srv, grammar=ANSWER)
    assert message["content"].startswith("Answer:") and "reasoning_content" not in message


def test_a_session_reuses_its_history_up_to_the_thought_the_template_drops(
    thinking: ServerProcess,
) -> None:
    base = thinking.base_url
    sid = httpx.post(f"{base}/v1/sessions", json={}, timeout=30).json()["id"]
    turn = {"content": ASK[0]["content"], **GREEDY, "grammar": OPENED}
    first = httpx.post(f"{base}/v1/sessions/{sid}/messages", json=turn, timeout=120).json()
    reply = first["choices"][0]["message"]
    assert reply["reasoning_content"].startswith("I think")
    nxt = {"content": "And three plus three?", "max_tokens": 4, "temperature": 0}
    second = httpx.post(f"{base}/v1/sessions/{sid}/messages", json=nxt, timeout=120).json()
    history = [*ASK, {"role": "assistant", "content": reply["content"]}]
    history.append({"role": "user", "content": nxt["content"]})
    assert second["usage"]["prompt_tokens"] == _input_tokens(thinking, history)
    # The first prompt is reused; the reply, shown now without its thought, is read again.
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert first["usage"]["prompt_tokens"] - 4 <= cached < first["usage"]["prompt_tokens"] + 4
