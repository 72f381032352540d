"""bench.prefix: every server up at once, each scenario on one server after the other."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import core, prefix
from bench.client import Result
from tests.server import ROOT


class FakePeer:
    def __init__(self, name: str, log: list[str], images: bool = False) -> None:
        self.name, self.images, self.log = name, images, log
        self.base_url = f"http://{name}"
        self.command, self.notes = [name], ""
        self.log_path = ROOT / "build" / "bench-logs" / f"{name}.log"

    def start(self) -> FakePeer:
        self.log.append(f"start {self.name}")
        return self

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def result(ttft: float) -> Result:
    return Result(ttft, ttft * 2, "x", 4, 100, 90)


def test_scenarios_take_turns_between_servers_that_are_all_up(monkeypatch: pytest.MonkeyPatch):
    log: list[str] = []

    def scenario(name: str):
        def run(base_url: str, cold: core.Cold) -> list[core.Row]:
            log.append(f"{name} {base_url}")
            return [(name, result(0.1), result(1.0))]

        return run

    def throughput(base_url: str, clients: int, tokens: int, **kw) -> tuple[float, list]:
        log.append(f"decode x{clients} {base_url}")
        return 100.0, [result(0.1)]

    monkeypatch.setattr(
        prefix,
        "scenarios",
        lambda plan, with_images: (
            [("a", scenario("a")), ("b", scenario("b"))]
            + ([("img", scenario("img"))] if with_images else [])
        ),
    )
    monkeypatch.setattr(prefix, "stream_chat", lambda *a, **kw: result(0.1))
    monkeypatch.setattr(core, "decode_throughput", throughput)
    monkeypatch.setattr(prefix, "PAUSE_S", 0.0)
    peers = [FakePeer("ours", log, images=True), FakePeer("peer", log)]
    servers, failed = prefix.run(peers, prefix.QUICK, {}, "model.gguf")  # type: ignore[arg-type]
    assert failed == {}
    assert log == [
        "start ours",
        "start peer",
        "a http://ours",
        "a http://peer",
        "b http://ours",
        "b http://peer",
        "img http://ours",  # only the server with a projector runs the image scenario
        "decode x1 http://ours",
        "decode x1 http://peer",
        "decode x8 http://ours",
        "decode x8 http://peer",
        "stop ours",
        "stop peer",
    ]
    assert set(servers["ours"]["scenarios"]) == {"a", "b", "img"}
    assert set(servers["peer"]["scenarios"]) == {"a", "b"}
    assert servers["peer"]["scenarios"]["a"]["ratio"] == pytest.approx(0.1)
    assert Path(servers["ours"]["log"]) == Path("build/bench-logs/ours.log")
