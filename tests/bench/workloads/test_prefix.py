"""bench.workloads.prefix: every server up at once, each scenario on one server after the other."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.lib import core
from bench.lib.client import Result
from bench.lib.server_process import ROOT
from bench.workloads import prefix


class FakeProcess:
    """A process whose CPU time grows by `step` at every reading."""

    def __init__(self, step: float) -> None:
        self.step, self.used = step, 0.0

    def cpu_seconds(self) -> float:
        self.used += self.step
        return self.used


class FakePeer:
    def __init__(self, name: str, log: list[str], images: bool = False, idle: float = 0) -> None:
        self.name, self.images, self.log = name, images, log
        self.base_url = f"http://{name}"
        self.command, self.notes = [name], ""
        self.log_path = ROOT / "build" / "bench-logs" / f"{name}.log"
        self.process = FakeProcess(idle)

    def start(self) -> FakePeer:
        self.log.append(f"start {self.name}")
        return self

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def result(ttft: float) -> Result:
    return Result(ttft, ttft * 2, "x", 4, 100, 90)


def test_scenarios_take_turns_between_servers_that_are_all_up(monkeypatch: pytest.MonkeyPatch):
    log: list[str] = []
    # Scenario "a" gives these warm TTFTs run after run: the report has their mean.
    warms = {"http://ours": iter([0.1, 0.3]), "http://llama-server": iter([0.2, 0.4])}

    def scenario(name: str):
        def run(base_url: str, cold: core.Cold) -> list[core.Row]:
            log.append(f"{name} {base_url}")
            warm = next(warms[base_url]) if name == "a" and base_url in warms else 0.1
            return [(name, result(warm), result(1.0))]

        return run

    rates = {"http://ours": iter([100.0, 140.0, 1.0, 3.0])}

    def throughput(base_url: str, clients: int, tokens: int, **kw) -> tuple[float, list]:
        log.append(f"decode x{clients} {base_url}")
        return next(rates.get(base_url, iter([100.0]))), [result(0.1)]

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
    peers = [
        FakePeer("ours", log, images=True),
        FakePeer("llama-server", log),
        FakePeer("other", log, idle=0.5),
    ]
    plan = dataclasses.replace(prefix.QUICK, repeats=2, decode_repeats=2)
    servers, failed = prefix.run(peers, plan, {}, "model.gguf")  # type: ignore[arg-type]
    assert failed == {}
    assert log == [
        "start ours",
        "start llama-server",
        "start other",
        "a http://ours",
        "a http://llama-server",
        "a http://other",
        # the second run: only the servers whose ratios are targets
        "a http://ours",
        "a http://llama-server",
        "b http://ours",
        "b http://llama-server",
        "b http://other",
        "b http://ours",
        "b http://llama-server",
        "img http://ours",  # only the server with a projector runs the image scenario
        "img http://ours",
        "decode x1 http://ours",
        "decode x1 http://llama-server",
        "decode x1 http://other",
        "decode x1 http://ours",
        "decode x1 http://llama-server",
        "decode x8 http://ours",
        "decode x8 http://llama-server",
        "decode x8 http://other",
        "decode x8 http://ours",
        "decode x8 http://llama-server",
        "stop ours",
        "stop llama-server",
        "stop other",
    ]
    assert set(servers["ours"]["scenarios"]) == {"a", "b", "img"}
    assert set(servers["other"]["scenarios"]) == {"a", "b"}
    # each figure is the mean over the runs
    assert servers["ours"]["scenarios"]["a"]["warm_ttft"] == pytest.approx(0.2)
    assert servers["llama-server"]["scenarios"]["a"]["warm_ttft"] == pytest.approx(0.3)
    assert servers["other"]["scenarios"]["a"]["ratio"] == pytest.approx(0.1)
    decode = servers["ours"]["throughput"]
    assert decode["1 client x 16 tokens"]["tokens_per_s"] == pytest.approx(120.0)
    assert decode["8 clients x 16 tokens"]["tokens_per_s"] == pytest.approx(2.0)
    assert len(decode["8 clients x 16 tokens"]["results"]) == 2
    assert servers["other"]["throughput"]["8 clients x 16 tokens"]["tokens_per_s"] == 100.0
    assert Path(servers["ours"]["log"]) == Path("build/bench-logs/ours.log")
    # What each server computed while the others were timed: "other" was read before and
    # after each of the 16 turns of ours and llama-server where it was up (0.5 s a turn).
    assert servers["ours"]["idle_cpu_s"] == 0.0
    assert servers["other"]["idle_cpu_s"] == pytest.approx(16 * 0.5)
