"""--sleep-idle-seconds through a real server: an idle server frees its model and says so, the
read-only routes leave it asleep, any POST wakes it, and a conversation's next turn after the
sleep reuses its prefix from the cache tiers (llama-server's starts over). With the tiny
projector, an image turn after a sleep loads the projector with the model."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ROOT, ServerProcess

STORY = " ".join(f"River {i} flows past the town of Vale{i} to the sea." for i in range(40))


def props(server: ServerProcess) -> dict:
    return httpx.get(server.base_url + "/props", timeout=10).json()


def wait_asleep(server: ServerProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not props(server)["is_sleeping"]:
        assert time.monotonic() < deadline, "the server did not fall asleep"
        time.sleep(0.1)


def rss_kib(server: ServerProcess) -> int:
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS:")).split()[1])


def chat(server: ServerProcess, messages: list[dict]) -> dict:
    body = {"messages": messages, "max_tokens": 8, "temperature": 0}
    r = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "2", "-c", "4096", "--sleep-idle-seconds", "1") as srv:
        yield srv


def test_an_idle_server_frees_its_model_and_the_read_only_routes_leave_it_asleep(
    server: ServerProcess,
) -> None:
    chat(server, [{"role": "user", "content": "Hello"}])  # the weights are in use
    awake = rss_kib(server)
    wait_asleep(server)
    assert "model asleep:" in server.log()
    # The weights (92 MiB) and the context are freed; the vocabulary stays.
    assert rss_kib(server) < awake - 50 * 1024
    for path in ("/health", "/props", "/models", "/v1/models", "/metrics", "/slots"):
        assert httpx.get(server.base_url + path, timeout=10).status_code == 200, path
    info = props(server)
    assert info["is_sleeping"] and info["total_slots"] == 2
    assert info["eos_token"]  # the vocabulary answers while asleep


def test_tokenizing_wakes_the_model(server: ServerProcess) -> None:
    wait_asleep(server)
    r = httpx.post(server.base_url + "/tokenize", json={"content": "Hello world"}, timeout=30)
    assert r.status_code == 200 and r.json()["tokens"]
    assert props(server)["is_sleeping"] is False


def test_the_next_turn_after_a_sleep_reuses_its_prefix(server: ServerProcess) -> None:
    first = [{"role": "user", "content": STORY + " Which river passes Vale3?"}]
    reply = chat(server, first)
    wait_asleep(server)
    second = first + [
        {"role": "assistant", "content": reply["choices"][0]["message"]["content"]},
        {"role": "user", "content": "And Vale7?"},
    ]
    usage = chat(server, second)["usage"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert cached >= reply["usage"]["prompt_tokens"]  # the whole first turn, and its reply
    assert cached / usage["prompt_tokens"] >= 0.9
    assert props(server)["is_sleeping"] is False


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    return str(out)


def test_an_image_turn_after_a_sleep_loads_the_projector_with_the_model(mmproj: str) -> None:
    pixel = (
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4"
        "z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    )
    content = [
        {"type": "image_url", "image_url": {"url": pixel}},
        {"type": "text", "text": "What is this?"},
    ]
    args = ("-np", "1", "-c", "2048", "--mmproj", mmproj, "--sleep-idle-seconds", "1")
    with ServerProcess(*args) as srv:
        first = chat(srv, [{"role": "user", "content": content}])["usage"]
        wait_asleep(srv)
        again = chat(srv, [{"role": "user", "content": content}])["usage"]
    assert again["prompt_tokens"] == first["prompt_tokens"]
    assert again["prompt_tokens_details"]["cached_tokens"] > 0
