"""Chunk KV placed at any position (blend) on the real packaged model, and its fallback on a
sliding-window model whose cache cannot move a chunk (Gemma 3 270M without --swa-full)."""

from __future__ import annotations

import pytest

from app.engine.blend_plan import BlendPlan, ChunkKeep, find_spans
from app.engine.engine import Engine
from app.engine.engine_config import EngineConfig
from app.engine.request import GenerationRequest
from mm.token_sequence import TokenSequence
from tests.app.engine.kv.test_sliding_window import gemma_path  # noqa: F401 (fixture)
from tests.app.engine.test_engine import GREEDY, run, started
from tests.engine_parts import parts_of

K = 8
CATS = "[1] cats.txt\nCats purr when content and sleep up to sixteen hours a day.\n\n"
ROCKETS = "[2] rockets.md\nThe Saturn V burned liquid oxygen and kerosene in five F-1 engines.\n\n"
ETNA = "[3] etna.txt\nMount Etna is an active volcano in Sicily; lava runs down its slopes.\n\n"


@pytest.fixture(scope="module")
def engine(model_path: str):
    # The packaged SmolLM2 does not pass blend's quality gate: forced, as a deployment may.
    config = EngineConfig(
        model_path=model_path, n_ctx=2048, n_parallel=2, blend_sink_tokens=K, blend_force=True
    )
    eng = Engine(config)
    eng.start()
    yield eng
    eng.stop()


def pieces(engine: Engine) -> tuple[list[int], dict[str, list[int]]]:
    def tok(text: str) -> list[int]:
        return engine.tokenizer.tokenize(text, add_special=False, parse_special=False)

    head = engine.tokenizer.tokenize("Answer from the sources.\nSources:\n\n", add_special=False)
    return head, {"cats": tok(CATS), "rockets": tok(ROCKETS), "etna": tok(ETNA)}


def ask(engine: Engine, names: list[str], question: str, blend: bool = True, salt: str = ""):
    head, chunks = pieces(engine)
    prompt = [*head]
    for name in names:
        prompt += chunks[name]
    tail = engine.tokenizer.tokenize(f"Question: {question}\nAnswer:", add_special=False)
    prompt += tail
    plan = None
    if blend:
        plan = BlendPlan(head, find_spans(prompt, [(n, chunks[n]) for n in names]))
    request = GenerationRequest(
        TokenSequence(prompt), GREEDY, max_tokens=2, blend=plan, cache_salt=salt
    )
    _, end = run(engine, request)
    return end, len(tail)


def test_a_new_combination_of_cached_chunks_computes_k_tokens_each_and_the_question(engine):
    first, _ = ask(engine, ["cats", "rockets"], "How long do cats sleep?")
    # Chunks seen for the first time are computed (on their own): none of it is cached.
    assert first.timings.chunk_n == 0 and first.timings.kv_reuse == "blend"
    ask(engine, ["etna"], "Where is Etna?")
    # Rockets never led a prompt: no prefix holds more than the head and a header's "[".
    end, n_tail = ask(engine, ["rockets", "etna", "cats"], "Which engines?")
    head, _ = pieces(engine)
    t = end.timings
    prefix_n = t.cache_n - t.chunk_n
    assert prefix_n <= len(head) + 1
    assert t.prompt_n == 3 * K + n_tail
    assert t.as_dict()["cache_sources"]["chunk"] == end.prompt_tokens - t.prompt_n - prefix_n
    assert end.cached_tokens == end.prompt_tokens - t.prompt_n


def record(engine: Engine, monkeypatch, names: tuple[str, ...]) -> list[str]:
    """The model's calls of `names`, in order, from now on."""
    ops: list[str] = []
    for name in names:
        real = getattr(parts_of(engine).model, name)

        def recorded(*args, _real=real, _name=name):
            ops.append(_name)
            return _real(*args)

        monkeypatch.setattr(parts_of(engine).model, name, recorded)
    return ops


def test_every_chunk_is_placed_before_the_first_repair_decode(engine, monkeypatch):
    """Where chunks are moved in llama.cpp, their cells are re-roped at the next decode, in a
    pass over the whole cache: placing every chunk before any repair makes that one pass per
    request, not one per chunk."""
    ask(engine, ["etna", "cats", "rockets"], "Which is hot?")  # each chunk's KV is kept
    shifter = parts_of(engine).blend.shifter
    monkeypatch.setattr(shifter, "shift", lambda *args: None)  # as a model it cannot
    ops = record(engine, monkeypatch, ("seq_shift", "decode"))
    end, _ = ask(engine, ["cats", "etna", "rockets"], "Which is loud?")
    assert end.timings.chunk_n > 0
    shifts = [i for i, op in enumerate(ops) if op == "seq_shift"]
    assert len(shifts) >= 2
    assert "decode" not in ops[shifts[0] : shifts[-1]]
    assert "decode" in ops[shifts[-1] :]


def test_kept_chunks_are_moved_on_the_host_leaving_llama_cpp_nothing_to_re_rope(
    engine, monkeypatch
):
    ask(engine, ["rockets", "cats", "etna"], "Which is fast?")  # each chunk's KV is kept
    ops = record(engine, monkeypatch, ("seq_shift", "state_restore"))
    end, _ = ask(engine, ["etna", "rockets", "cats"], "Which burns?")
    assert end.timings.chunk_n > 0 and end.timings.kv_reuse == "blend"
    assert "state_restore" in ops and "seq_shift" not in ops


def test_another_tenant_never_gets_the_chunks(engine):
    ask(engine, ["cats", "etna"], "What purrs?", salt="tenant-a")
    end, _ = ask(engine, ["etna", "cats"], "What purrs?", salt="tenant-b")
    assert end.timings.chunk_n == 0


def test_blended_kv_is_never_an_exact_prefix(engine):
    ask(engine, ["rockets", "cats"], "What burned?")
    blended, _ = ask(engine, ["cats", "rockets"], "What burned?")
    assert blended.timings.chunk_n > 0
    head, _ = pieces(engine)
    exact, _ = ask(engine, ["cats", "rockets"], "What burned?", blend=False)
    # The slot holds the whole prompt, but only the head and the first chunk's repaired
    # tokens are exact.
    assert exact.cached_tokens <= len(head) + 1 + K


def test_deleting_a_document_purges_its_chunk_kv(engine):
    ask(engine, ["rockets", "etna"], "What erupts?")
    engine.call(lambda: parts_of(engine).reuse.forget_documents({"etna"})).result()
    end, _ = ask(engine, ["etna", "rockets"], "What erupts?")
    _, chunks = pieces(engine)
    assert end.timings.chunk_n == len(chunks["rockets"]) - K  # etna computed again


def test_a_cache_that_cannot_move_chunks_falls_back_to_prefix_reuse(gemma_path):  # noqa: F811
    with started(gemma_path, n_ctx=1024, n_parallel=1, swa_full=False, warmup=False) as eng:
        end, _ = ask(eng, ["cats", "rockets"], "What purrs?")
        assert end.timings.kv_reuse == "prefix"
        assert "sliding-window" in end.timings.kv_reuse_reason
        assert end.timings.as_dict()["kv_reuse_reason"] == end.timings.kv_reuse_reason
        assert end.timings.chunk_n == 0


def test_a_background_chunk_request_keeps_its_kv_unless_its_document_was_deleted(engine):
    head, chunks = pieces(engine)

    def kept(name: str, document_id: str) -> bool:
        keep = ChunkKeep(len(head), document_id)
        prompt = TokenSequence([*head, *chunks[name]])
        request = GenerationRequest(prompt, GREEDY, max_tokens=1, cache_salt="bg", keep_chunk=keep)
        run(engine, request)
        return engine.call(lambda: engine.has_chunk_kv("bg", head, chunks[name])).result()

    assert kept("cats", "cats-doc")
    # Deleted while its request waited or ran: what it computed is not kept.
    engine.call(lambda: parts_of(engine).reuse.forget_documents({"gone-doc"})).result()
    assert not kept("etna", "gone-doc")
