"""Router mode through a real server: `--models-dir` with the packaged model and its twin (the
same tokenizer, random weights: bench/lib/twin_model.py) and a file llama.cpp cannot load, at
most one model loaded. Models are listed with their status, loaded on request and unloaded for
room; a conversation that comes back to a model after the other one was loaded reuses its
prefix (the model slept with its KV, it did not start over); a model that fails is `failed`
with the reason and the others are served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from bench.lib.twin_model import twin_model
from tests.eventually import eventually

pytestmark = pytest.mark.slow  # model servers start (make test-fast leaves it out)

STORY = " ".join(f"River {i} flows past the town of Vale{i} to the sea." for i in range(40))


@pytest.fixture(scope="module")
def models_dir(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    (folder / "smollm2.gguf").symlink_to(model_path)
    (folder / "twin.gguf").symlink_to(twin_model())
    (folder / "broken.gguf").write_bytes(b"GGUF not really")
    return folder


@pytest.fixture(scope="module")
def router(models_dir: Path) -> Iterator[ServerProcess]:
    args = ("--models-dir", str(models_dir), "--models-max", "1", "-np", "2", "-c", "4096")
    with ServerProcess(*args) as server:
        yield server


def status(server: ServerProcess) -> dict[str, str]:
    data = httpx.get(server.base_url + "/models", timeout=10).json()["data"]
    return {m["id"]: m["status"]["value"] for m in data}


def chat(server: ServerProcess, model: str, messages: list[dict]) -> httpx.Response:
    body = {"model": model, "messages": messages, "max_tokens": 8, "temperature": 0}
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=300)


def test_the_models_are_listed_unloaded_and_props_says_router(router: ServerProcess) -> None:
    assert status(router) == {"broken": "unloaded", "smollm2": "unloaded", "twin": "unloaded"}
    props = httpx.get(router.base_url + "/props", timeout=10).json()
    assert props["role"] == "router" and props["max_instances"] == 1
    assert props["models_autoload"] is True
    same = httpx.get(router.base_url + "/v1/models", timeout=10).json()["data"]
    assert [m["id"] for m in same] == ["broken", "smollm2", "twin"]


def test_an_unknown_or_missing_model_is_a_400_naming_it(router: ServerProcess) -> None:
    messages = [{"role": "user", "content": "Hello"}]
    r = chat(router, "nope", messages)
    assert r.status_code == 400 and "'nope' not found" in r.json()["error"]["message"]
    assert r.json()["error"]["param"] == "model"
    r = httpx.post(router.base_url + "/v1/chat/completions", json={"messages": messages})
    assert r.status_code == 400 and "missing" in r.json()["error"]["message"]


def test_a_conversation_back_on_its_model_reuses_its_prefix(router: ServerProcess) -> None:
    first = [{"role": "user", "content": STORY + " Which river passes Vale3?"}]
    r = chat(router, "smollm2", first)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert status(router)["smollm2"] == "loaded"
    assert chat(router, "twin", [{"role": "user", "content": "Hi"}]).status_code == 200
    assert status(router) == {"broken": "unloaded", "smollm2": "unloaded", "twin": "loaded"}
    second = first + [
        {"role": "assistant", "content": reply["choices"][0]["message"]["content"]},
        {"role": "user", "content": "And Vale7?"},
    ]
    r = chat(router, "smollm2", second)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] / usage["prompt_tokens"] >= 0.9
    assert status(router)["twin"] == "unloaded"


def test_load_and_unload_on_request(router: ServerProcess) -> None:
    url = router.base_url
    r = httpx.post(url + "/models/load", json={"model": "twin"}, timeout=30)
    assert r.status_code == 200 and r.json() == {"success": True}
    eventually(lambda: status(router)["twin"] == "loaded", "twin loaded")
    r = httpx.post(url + "/models/load", json={"model": "twin"}, timeout=30)
    assert r.status_code == 400 and "already running" in r.json()["error"]["message"]
    r = httpx.post(url + "/models/unload", json={"model": "twin"}, timeout=30)
    assert r.status_code == 200 and status(router)["twin"] == "unloaded"
    r = httpx.post(url + "/models/unload", json={"model": "twin"}, timeout=30)
    assert r.status_code == 400 and "not running" in r.json()["error"]["message"]


def test_a_model_that_cannot_load_fails_alone(router: ServerProcess) -> None:
    r = chat(router, "broken", [{"role": "user", "content": "Hello"}])
    assert r.status_code == 503
    assert "failed to load" in r.json()["error"]["message"]
    listed = {m["id"]: m for m in httpx.get(router.base_url + "/models").json()["data"]}
    assert listed["broken"]["status"]["value"] == "failed"
    assert listed["broken"]["status"]["failed"] is True and listed["broken"]["status"]["reason"]
    assert chat(router, "smollm2", [{"role": "user", "content": "Hi"}]).status_code == 200


def test_a_resumable_stream_is_read_again_through_the_router(router: ServerProcess) -> None:
    conv = "conv-through/the router"
    body = {
        "model": "twin",
        "stream": True,
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "Hello"}],
    }
    url = router.base_url
    headers = {"X-Conversation-Id": conv}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200
        sent = "".join(r.iter_text())
    replay = httpx.get(url + "/v1/stream", params={"conv_id": conv, "from": 0}, timeout=30)
    assert replay.status_code == 200 and replay.text == sent and "data: " in sent
    assert httpx.delete(url + "/v1/stream", params={"conv_id": conv}).status_code == 204
    gone = httpx.get(url + "/v1/stream", params={"conv_id": conv, "from": 0}, timeout=30)
    assert gone.status_code == 404
    unknown = httpx.get(url + "/v1/stream", params={"conv_id": "never sent"}, timeout=30)
    assert unknown.status_code == 404


def test_loads_asked_back_to_back_leave_every_model_usable(router: ServerProcess) -> None:
    # Each load unloads the other model (--models-max 1) while it may still be waking: a wake
    # cancels the sleep asked for before it, and a request is never admitted to a sleeping
    # model (this hung: the model fell asleep again as the request was admitted).
    hello = [{"role": "user", "content": "Hello"}]
    for _ in range(3):
        for model in ("smollm2", "twin"):
            r = httpx.post(router.base_url + "/models/load", json={"model": model}, timeout=30)
            assert r.status_code in (200, 400), r.text  # 400: already running
        assert chat(router, "smollm2", hello).status_code == 200
        assert chat(router, "twin", hello).status_code == 200
