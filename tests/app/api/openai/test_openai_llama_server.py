"""llama-server's extras on the chat route and its server flags, through a real server: `n`
choices, a last assistant message continued (prefill, `continue_final_message`,
`add_generation_prompt`), `__verbose`, `--temp`, several `--alias` names, `--no-ui`."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess

ASK = [{"role": "user", "content": "Tell me a story."}]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = ("-np", "2", "-c", "2048", "--temp", "0", "-a", "zeta, alpha", "--no-ui")
    with ServerProcess(*args) as srv:
        yield srv


def chat(server: ServerProcess, **body: object) -> httpx.Response:
    body = {"messages": ASK, "max_tokens": 4, **body}
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120)


def prompt_of(server: ServerProcess, **body: object) -> str:
    r = chat(server, verbose=True, **body)
    assert r.status_code == 200, r.text
    return r.json()["__verbose"]["prompt"]


def test_n_choices_are_generations_of_their_own(server: ServerProcess):
    for slot in (None, 0):  # both on one slot: one after the other
        extra = {"id_slot": slot} if slot is not None else {}
        r = chat(server, n=3, temperature=1.0, **extra)
        assert r.status_code == 200, r.text
        choices = r.json()["choices"]
        assert [c["index"] for c in choices] == [0, 1, 2]
        assert all(c["message"]["role"] == "assistant" and c["finish_reason"] for c in choices)
    streamed = chat(server, n=2, stream=True)
    assert streamed.status_code == 400 and streamed.json()["error"]["param"] == "n"


def test_a_last_assistant_message_is_continued(server: ServerProcess):
    opening = prompt_of(server)
    assert opening.endswith("<|im_start|>assistant\n")
    prefill = [*ASK, {"role": "assistant", "content": "Once upon"}]
    assert prompt_of(server, messages=prefill) == opening + "Once upon"
    # Text parts joined by a blank line, as llama.cpp renders a continued message.
    parts = [{"type": "text", "text": "Once"}, {"type": "text", "text": "upon"}]
    assert prompt_of(server, messages=[*ASK, {"role": "assistant", "content": parts}]) == (
        opening + "Once\n\nupon"
    )
    explicit = {"continue_final_message": True, "add_generation_prompt": False}
    assert prompt_of(server, messages=prefill, **explicit) == opening + "Once upon"
    both = chat(server, messages=prefill, continue_final_message=True)
    assert both.status_code == 400
    assert "add_generation_prompt and continue_final_message" in both.json()["error"]["message"]
    bare = prompt_of(server, add_generation_prompt=False)
    assert opening.startswith(bare) and not bare.endswith("assistant\n")


def test_verbose_is_asked_for(server: ServerProcess):
    plain = chat(server).json()
    assert "__verbose" not in plain
    verbose = chat(server, verbose=True).json()["__verbose"]
    assert (
        verbose["content"] == chat(server, verbose=True).json()["choices"][0]["message"]["content"]
    )
    assert "Tell me a story." in verbose["prompt"] and verbose["tokens_evaluated"] > 0


def test_the_server_flags_of_llama_server(server: ServerProcess):
    # --temp 0: requests without a temperature are greedy, and say so.
    props = httpx.get(server.base_url + "/props").json()
    assert props["default_generation_settings"]["params"]["temperature"] == 0
    texts = {chat(server, max_tokens=12).json()["choices"][0]["message"]["content"] for _ in "ab"}
    assert len(texts) == 1
    # -a zeta,alpha: every name listed, the first in sorted order is the name.
    model = httpx.get(server.base_url + "/v1/models").json()["data"][0]
    assert model["id"] == "alpha" and model["aliases"] == ["alpha", "zeta"]
    assert httpx.get(server.base_url + "/v1/models/zeta").status_code == 200
    assert chat(server).json()["model"] == "alpha"
    # --no-ui: the API only.
    assert httpx.get(server.base_url + "/").status_code == 404
