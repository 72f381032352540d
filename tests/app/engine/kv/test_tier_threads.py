"""KV tier moves on the real model: the engine thread never hashes a state or writes a file.

Every stream waits for what the engine thread does between steps, so the disk tier's checksum
and file write run on its writer thread, and a queued request's read from disk on its reader
thread (prefetched while the request waits).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

import pytest

from app.cache import state_file
from app.engine.engine import Engine
from app.engine.engine_config import EngineConfig
from app.engine.events import Finished
from app.engine.request import GenerationRequest
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence

GREEDY = SamplingParams(temperature=0.0)


def run(engine: Engine, prompt: TokenSequence) -> Finished:
    async def go() -> Finished:
        async for event in engine.open(GenerationRequest(prompt.copy(), GREEDY, max_tokens=2)):
            if isinstance(event, Finished):
                return event
        raise AssertionError("no Finished event")

    return asyncio.run(go())


@pytest.fixture()
def threads(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Which threads computed checksums and wrote state files."""
    seen: Counter = Counter()
    checksum, write = state_file.checksum, state_file.write

    def counted_checksum(data):  # noqa: ANN001, ANN202
        seen["checksum@" + threading.current_thread().name.split("_")[0]] += 1
        return checksum(data)

    def counted_write(*args):  # noqa: ANN002, ANN202
        seen["write@" + threading.current_thread().name.split("_")[0]] += 1
        return write(*args)

    monkeypatch.setattr(state_file, "checksum", counted_checksum)
    monkeypatch.setattr(state_file, "write", counted_write)
    return seen


def test_saves_and_disk_restores_do_no_hashing_or_writing_on_the_engine_thread(
    model_path: str, tmp_path: Path, threads: Counter
):
    config = EngineConfig(
        model_path=model_path, n_ctx=1024, n_parallel=1, warmup=False, cache_dir=str(tmp_path)
    )
    ops: list[tuple[str, str, str]] = []

    def on_op(op: str, tier: str, seconds: float) -> None:
        ops.append((op, tier, threading.current_thread().name))

    engine = Engine(config, on_cache_op=on_op)
    engine.start()
    try:
        a = TokenSequence(engine.tokenizer.tokenize("Alpha notes about rivers and tides. " * 6))
        b = TokenSequence(engine.tokenizer.tokenize("Bravo notes about mountains. " * 6))
        run(engine, a)
        run(engine, b)  # one slot: a's KV is saved to host memory and disk first
    finally:
        engine.stop()  # the slot's KV (b) is persisted too
    assert ("save", "host", "engine") in ops
    assert threads["write@cache-writer"] >= 2 and threads["checksum@cache-writer"] >= 2

    again = Engine(config)  # a restart: host memory is empty, the disk tier has a and b
    again.start()
    try:
        done = run(again, a)
    finally:
        again.stop()
    assert done.timings.cache_source == "disk" and done.cached_tokens == len(a) - 1
    assert threads["checksum@cache-reader"] >= 1  # prefetched and checked off the engine thread
    assert not [k for k in threads if k.endswith("@engine")], threads
