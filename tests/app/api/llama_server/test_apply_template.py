"""/apply-template through a real server with a real model's template (Qwen3's, a copy of
llama.cpp's): --reasoning sets its `enable_thinking`, a request's `chat_template_kwargs` override
it, and `add_generation_prompt` false leaves the generation prompt out, as llama-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.lib.server_process import ServerProcess

QWEN3 = Path(__file__).parents[2] / "chat" / "templates" / "Qwen-Qwen3-0.6B.jinja"
QUESTION = [{"role": "user", "content": "What is today?"}]
CLOSED = "<|im_start|>assistant\n<think>\n\n</think>\n\n"  # thinking off: an empty thought


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    flags = ("--chat-template-file", str(QWEN3), "--reasoning", "off")
    with ServerProcess("-np", "1", "-c", "512", *flags) as srv:
        yield srv


def apply(server: ServerProcess, **extra: Any) -> httpx.Response:
    return httpx.post(server.base_url + "/apply-template", json={"messages": QUESTION, **extra})


def test_reasoning_off_closes_the_thought(server: ServerProcess):
    assert apply(server).json()["prompt"].endswith(CLOSED)


def test_chat_template_kwargs_override_the_server(server: ServerProcess):
    kwargs = {"enable_thinking": True}
    prompt = apply(server, chat_template_kwargs=kwargs).json()["prompt"]
    assert prompt.endswith("<|im_start|>assistant\n") and "<think>" not in prompt


def test_no_generation_prompt_when_not_asked(server: ServerProcess):
    prompt = apply(server, add_generation_prompt=False).json()["prompt"]
    assert prompt.endswith("What is today?<|im_end|>\n")


def test_a_reserved_name_in_the_kwargs_is_a_400(server: ServerProcess):
    r = apply(server, chat_template_kwargs={"messages": []})
    assert r.status_code == 400 and "chat_template_kwargs" in r.json()["error"]["message"]
