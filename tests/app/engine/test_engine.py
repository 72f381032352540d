"""The engine on the real packaged model, without HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from app.engine.engine import Engine
from app.engine.engine_config import EngineConfig
from app.engine.events import Failed, Finished, TextDelta
from app.engine.kv.prefix_reuse import LONG_PREFILL_MIN
from app.engine.request import GenerationRequest, RequestError
from app.engine.sampler import SamplingParams
from mm.token_sequence import MediaChunk, TokenSequence
from tests.engine_parts import parts_of, thread_of
from tests.eventually import eventually, eventually_async

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module")
def engine(model_path: str):
    eng = Engine(EngineConfig(model_path=model_path, n_ctx=2048, n_parallel=2))
    eng.start()
    yield eng
    eng.stop()


@contextmanager
def started(model_path: str, **config: Any) -> Iterator[Engine]:
    """An engine of a test's own configuration, stopped when the test is done with it."""
    eng = Engine(EngineConfig(model_path=model_path, **config))
    eng.start()
    try:
        yield eng
    finally:
        eng.stop()


def prompt_of(engine: Engine, text: str) -> TokenSequence:
    return TokenSequence(engine.tokenizer.tokenize(text))


async def collect(engine: Engine, request: GenerationRequest) -> tuple[str, Finished]:
    text = ""
    async for event in engine.open(request):
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, Finished):
            return text, event
        elif isinstance(event, Failed):
            raise AssertionError(event.message)
    raise AssertionError("no Finished event")


def run(engine: Engine, request: GenerationRequest) -> tuple[str, Finished]:
    return asyncio.run(collect(engine, request))


async def async_events(engine: Engine, request: GenerationRequest) -> list[Any]:
    return [event async for event in engine.open(request)]


def collect_events(engine: Engine, request: GenerationRequest) -> list[Any]:
    return asyncio.run(async_events(engine, request))


@contextmanager
def decode_sizes(engine: Engine) -> Iterator[list[int]]:
    """The number of tokens of each llama_decode the engine's steps run meanwhile."""
    sizes: list[int] = []
    decode = parts_of(engine).model.decode

    def counting(batch):  # noqa: ANN001, ANN202 (the Model method's own types)
        sizes.append(batch.n_tokens)
        return decode(batch)

    parts_of(engine).model.decode = counting  # type: ignore[method-assign]
    try:
        yield sizes
    finally:
        del parts_of(engine).model.decode


def test_exact_repeat_evaluates_nothing_and_samples_from_the_kept_logits(engine: Engine):
    prompt = prompt_of(engine, "The quick brown fox jumps over the lazy dog. " * 4)
    first_text, first = run(engine, GenerationRequest(prompt, GREEDY, max_tokens=6))
    with decode_sizes(engine) as decodes:
        text, done = run(engine, GenerationRequest(prompt.copy(), GREEDY, max_tokens=6))
    assert first.timings.prompt_n == len(prompt) - first.cached_tokens
    assert done.cached_tokens == len(prompt)
    assert done.timings.prompt_n == 0
    assert text == first_text
    assert decodes == [1] * 5  # the 5 tokens after the first, one at a time; no prompt row


def test_exact_repeat_with_logprobs_and_a_seed_matches_the_first_run(engine: Engine):
    """The kept logits are the prompt's own: a seeded draw and the logprobs of the first
    token are what the first run had (sampled from the context's row there)."""
    prompt = prompt_of(engine, "Name a colour of the rainbow and say why you like it.")
    seeded = SamplingParams(temperature=1.2, top_k=0, top_p=1.0, min_p=0.0, seed=1234)
    request = GenerationRequest(prompt, seeded, max_tokens=1, logprobs=5)
    first = collect_events(engine, request)
    repeat = GenerationRequest(prompt.copy(), seeded, max_tokens=1, logprobs=5)
    again = collect_events(engine, repeat)
    assert isinstance(again[-1], Finished) and again[-1].cached_tokens == len(prompt)
    assert [d.tokens for d in again[:-1]] == [d.tokens for d in first[:-1]]
    assert [d.logprobs for d in again[:-1]] == [d.logprobs for d in first[:-1]]


def test_kept_logits_go_when_the_prompt_they_ended_is_no_longer_whole(engine: Engine):
    base = prompt_of(engine, "A story about a lighthouse keeper and a storm at sea. " * 3)
    longer = base.copy()
    longer.extend(engine.tokenizer.tokenize(" And then?", add_special=False))
    shorter = base.copy()
    shorter.keep_first(len(base) - 6)
    run(engine, GenerationRequest(base, GREEDY, max_tokens=2))
    _, grown = run(engine, GenerationRequest(longer, GREEDY, max_tokens=2))
    _, back = run(engine, GenerationRequest(base.copy(), GREEDY, max_tokens=2))
    assert grown.cached_tokens == len(base) and back.timings.prompt_n == 1  # not longer's end
    _, cut = run(engine, GenerationRequest(shorter, GREEDY, max_tokens=2))
    _, after_cut = run(engine, GenerationRequest(base.copy(), GREEDY, max_tokens=2))
    assert cut.timings.prompt_n == 1
    assert after_cut.timings.prompt_n > 0  # base's logits went with the cut


def test_a_repeat_that_drops_only_the_last_reply_saves_nothing_to_host_memory(engine: Engine):
    # Saving copies the whole sequence on the way to the first token: for a retry of the same
    # prompt, whose KV loses only the previous reply, it is not worth it.
    prompt = prompt_of(engine, "Write about the sea and its tides, in plain words. " * 20)
    run(engine, GenerationRequest(prompt, GREEDY, max_tokens=24, ignore_eos=True))
    saves = parts_of(engine).reuse.stats.saves
    _, again = run(engine, GenerationRequest(prompt.copy(), GREEDY, max_tokens=4))
    assert again.cached_tokens == len(prompt)
    assert parts_of(engine).reuse.stats.saves == saves


def test_cache_prompt_false_recomputes_everything(engine: Engine):
    prompt = prompt_of(engine, "Once upon a time in a land far away")
    run(engine, GenerationRequest(prompt, GREEDY, max_tokens=4))
    _, done = run(
        engine, GenerationRequest(prompt.copy(), GREEDY, max_tokens=4, cache_prompt=False)
    )
    assert done.cached_tokens == 0 and done.timings.prompt_n == len(prompt)


def test_slot_cache_holds_prompt_and_decoded_tokens(engine: Engine):
    prompt = prompt_of(engine, "Counting: 1, 2, 3, 4,")
    _, done = run(engine, GenerationRequest(prompt, GREEDY, max_tokens=5, id_slot=1))
    assert done.finish_reason == "length"
    slot = engine.slots()[1]
    # The 5th sampled token ended the request before being decoded, so the KV has 4 of them.
    assert slot.n_cached == len(prompt) + done.completion_tokens - 1


def test_request_goes_to_the_slot_that_holds_its_prefix(engine: Engine):
    a = prompt_of(engine, "Alpha document. " * 20)
    b = prompt_of(engine, "Bravo document. " * 20)
    _, done_a = run(engine, GenerationRequest(a, GREEDY, max_tokens=2))
    _, done_b = run(engine, GenerationRequest(b, GREEDY, max_tokens=2))
    assert done_a.timings.slot != done_b.timings.slot  # LRU spreads different prompts
    a_more = a.copy()
    a_more.extend(engine.tokenizer.tokenize(" And more.", add_special=False))
    _, done = run(engine, GenerationRequest(a_more, GREEDY, max_tokens=2))
    assert done.timings.slot == done_a.timings.slot
    assert done.cached_tokens >= len(a) - 1


def test_requests_queue_fifo_when_slots_are_busy(engine: Engine):
    prompts = [prompt_of(engine, f"List {i}: a, b, c,") for i in range(5)]

    async def all_of() -> list[tuple[str, Finished]]:
        return await asyncio.gather(
            *(
                collect(engine, GenerationRequest(p, GREEDY, max_tokens=6, cache_prompt=False))
                for p in prompts
            )
        )

    results = asyncio.run(all_of())
    assert [r[1].completion_tokens for r in results] == [6] * 5
    # A slot is freed before its request's last event is sent (Task's invariant): no waiting.
    assert all(s.state == "idle" for s in engine.slots())


def test_the_slot_is_idle_when_the_client_sees_the_end(engine: Engine):
    # A client that got the final event and sends the next request for the same slot at once
    # must find it free: no sleep, no retry.
    prompt = prompt_of(engine, "Colours: red, green,")

    async def back_to_back() -> list[tuple[str, bool]]:
        seen = []
        for i in range(12):
            slot = i % 2
            async for event in engine.open(
                GenerationRequest(prompt.copy(), GREEDY, max_tokens=2, id_slot=slot)
            ):
                if isinstance(event, Finished | Failed):
                    seen.append((engine.slots()[slot].state, isinstance(event, Finished)))
        return seen

    seen = asyncio.run(back_to_back())
    assert seen == [("idle", True)] * 12


def test_a_decode_from_another_thread_is_refused(engine: Engine):
    # All llama.cpp compute belongs to the engine thread (one OpenMP team per process).
    from mm.compute_thread import WrongThreadError

    assert parts_of(engine).model.compute.owner == thread_of(engine).ident
    batch = parts_of(engine).model.new_batch()
    try:
        batch.add(engine.tokenizer.bos, 0, 0, True)
        with pytest.raises(WrongThreadError, match="engine"):
            parts_of(engine).model.decode(batch)
    finally:
        batch.close()


def test_bad_requests_are_refused_before_queueing(engine: Engine):
    with pytest.raises(RequestError, match="2048"):
        engine.validate(GenerationRequest(TokenSequence([1] * 3000)))
    with pytest.raises(RequestError, match="id_slot"):
        engine.validate(GenerationRequest(TokenSequence([1, 2]), id_slot=2))
    with pytest.raises(RequestError, match="vocabulary|n_vocab|out"):
        engine.validate(GenerationRequest(TokenSequence([1, engine.tokenizer.n_vocab])))
    with pytest.raises(RequestError, match="empty"):
        engine.validate(GenerationRequest(TokenSequence()))
    media = TokenSequence([1])
    media.add_media(MediaChunk("img", 4, 4))
    with pytest.raises(RequestError, match="projector"):
        engine.validate(GenerationRequest(media))


def test_a_failure_while_admitting_fails_that_request_and_the_engine_serves_on(
    model_path: str, monkeypatch: pytest.MonkeyPatch
):
    with started(model_path, n_ctx=1024, n_parallel=1) as engine:
        prepare = parts_of(engine).reuse.prepare
        calls = []

        def fails_once(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("a bug")
            return prepare(*args, **kwargs)

        monkeypatch.setattr(parts_of(engine).reuse, "prepare", fails_once)
        request = GenerationRequest(prompt_of(engine, "Hello there"), GREEDY, max_tokens=2)
        # (Before, the request was never answered: a guard, not a timing threshold.)
        events = asyncio.run(asyncio.wait_for(async_events(engine, request), 120))
        assert isinstance(events[-1], Failed) and "internal error" in events[-1].message
        _, end = run(engine, GenerationRequest(request.prompt, GREEDY, max_tokens=2))
        assert end.completion_tokens == 2


def test_a_stopped_engine_refuses_requests_and_calls_with_503(model_path: str):
    eng = Engine(EngineConfig(model_path=model_path, n_ctx=256, n_parallel=1, warmup=False))
    eng.start()
    prompt = prompt_of(eng, "Hello there")
    assert eng.call(lambda: "between steps").result(timeout=30) == "between steps"
    eng.stop()
    with pytest.raises(RequestError) as refused:
        run(eng, GenerationRequest(prompt, GREEDY, max_tokens=1))
    assert refused.value.status == 503
    with pytest.raises(RequestError):
        eng.check_room()
    with pytest.raises(RequestError):
        eng.call(lambda: None).result(timeout=30)
    assert eng.n_waiting == 0


def test_full_kv_stops_one_request_and_the_rest_complete(model_path: str):
    # n_ctx_request: each request may use the whole KV (the default share, 128, would stop
    # both before the KV is full).
    config = EngineConfig(
        model_path=model_path, n_ctx=256, n_parallel=2, n_ctx_request=256, warmup=False
    )
    small = Engine(config)
    small.start()
    try:
        prompt = prompt_of(small, "Tell me everything.")

        async def both() -> list[tuple[str, object]]:
            async def one() -> tuple[str, object]:
                last = None
                async for event in small.open(
                    GenerationRequest(prompt.copy(), GREEDY, max_tokens=200, ignore_eos=True)
                ):
                    last = event
                return last

            return await asyncio.gather(one(), one())

        results = asyncio.run(both())
        # Two requests of ~210 tokens cannot both fit 256 cells: one is stopped early, the other
        # gets all its tokens; neither hangs and every slot is free afterwards.
        finished = [r for r in results if isinstance(r, Finished)]
        assert any(r.completion_tokens == 200 for r in finished)
        assert len(finished) + sum(isinstance(r, Failed) for r in results) == 2
        assert any(isinstance(r, Failed) or r.completion_tokens < 200 for r in results)
        # The engine frees a slot before it sends the last event (Task's invariant).
        assert all(s.state == "idle" for s in small.slots())
    finally:
        small.stop()


def wait_for_cached(engine: Engine, slot: int, n: int) -> int:
    eventually(lambda: engine.slots()[slot].n_cached >= n, f"slot {slot} to cache {n} tokens")
    return engine.slots()[slot].n_cached


def test_reply_cut_by_max_tokens_prefills_its_last_token_and_the_continuation(engine: Engine):
    prompt = prompt_of(engine, "Numbers: 10, 11, 12,")
    cont = [engine.tokenizer.eos, 198, 42]
    _, done = run(
        engine, GenerationRequest(prompt, GREEDY, max_tokens=3, id_slot=0, continuation=cont)
    )
    assert done.finish_reason == "length"
    # prompt + 2 decoded tokens + the 3rd (sampled, never decoded) + the continuation
    assert wait_for_cached(engine, 0, len(prompt) + 3 + len(cont)) == len(prompt) + 3 + len(cont)


def test_stop_string_cut_prefills_nothing(engine: Engine):
    prompt = prompt_of(engine, "Numbers: 20, 21, 22,")
    _, done = run(
        engine,
        GenerationRequest(
            prompt,
            GREEDY,
            max_tokens=8,
            id_slot=1,
            stop=["2"],
            continuation=[engine.tokenizer.eos, 198],
        ),
    )
    assert done.finish_reason == "stop"
    # The idle prefill is queued before the last event is sent: none was queued.
    assert parts_of(engine).scheduler.slots[1].tail is None
    assert engine.slots()[1].n_cached == len(prompt) + done.completion_tokens - 1


def test_prefix_held_by_another_slot_is_copied_not_recomputed(engine: Engine):
    numbers = prompt_of(engine, "Numbers: " + ", ".join(str(i) for i in range(1, 41)) + ",")
    run(engine, GenerationRequest(numbers, GREEDY, max_tokens=2, id_slot=0))
    longer = numbers.copy()
    longer.extend(engine.tokenizer.tokenize(" 41, 42,", add_special=False))
    text, done = run(engine, GenerationRequest(longer, GREEDY, max_tokens=3, id_slot=1))
    assert done.timings.cache_source == "other_slot"
    assert done.cached_tokens >= len(numbers)
    assert done.timings.prompt_n == len(longer) - done.cached_tokens
    assert text.lstrip().startswith("43")  # the copied KV is the right one


def test_concurrent_requests_wait_for_a_shared_prefix_then_copy_it(engine: Engine):
    shared = prompt_of(engine, "Shared context: " + "the river runs past the mill. " * 40)
    prompts = []
    for tail in (" First question?", " Second question?"):
        p = shared.copy()
        p.extend(engine.tokenizer.tokenize(tail, add_special=False))
        prompts.append(p)

    async def both() -> list[tuple[str, Finished]]:
        return await asyncio.gather(
            *(collect(engine, GenerationRequest(p, GREEDY, max_tokens=2)) for p in prompts)
        )

    results = [r[1] for r in asyncio.run(both())]
    # One computes the shared prefix; the other waits for it and copies it from that slot.
    later = max(results, key=lambda r: r.cached_tokens)
    assert later.timings.cache_source == "other_slot"
    assert later.cached_tokens >= 0.9 * len(shared)
    assert sum(r.timings.prompt_n for r in results) < 1.2 * len(shared)


def test_salted_cache_is_not_reused_under_another_salt(engine: Engine):
    prompt = prompt_of(engine, "A private document about tenant A's plans. " * 5)
    run(engine, GenerationRequest(prompt, GREEDY, max_tokens=2, cache_salt="tenant-a"))
    _, other = run(
        engine, GenerationRequest(prompt.copy(), GREEDY, max_tokens=2, cache_salt="tenant-b")
    )
    _, same = run(
        engine, GenerationRequest(prompt.copy(), GREEDY, max_tokens=2, cache_salt="tenant-a")
    )
    assert other.cached_tokens == 0
    assert same.cached_tokens == len(prompt)


def test_prefix_whose_slot_was_taken_comes_back_from_host_memory(model_path: str):
    with started(model_path, n_ctx=1024, n_parallel=1, warmup=False) as one:
        a = prompt_of(one, "Conversation A about rivers and mills. " * 12)
        b = prompt_of(one, "Conversation B about stars and comets. " * 12)
        run(one, GenerationRequest(a, GREEDY, max_tokens=2))
        run(one, GenerationRequest(b, GREEDY, max_tokens=2))  # takes the only slot: A is saved
        text, again = run(one, GenerationRequest(a.copy(), GREEDY, max_tokens=2))
        assert again.timings.cache_source == "host"
        assert again.cached_tokens == len(a) - 1
        stats = parts_of(one).reuse.snapshot()
        assert stats.hits["host"] == 1 and stats.saves >= 1
        assert 0 < stats.host.bytes <= stats.host.budget_bytes
        one.call(parts_of(one).reuse.reset).result(timeout=30)
        _, after_reset = run(one, GenerationRequest(a.copy(), GREEDY, max_tokens=2))
        assert after_reset.cached_tokens == 0 and parts_of(one).reuse.snapshot().host.entries == 0


def test_a_new_task_moves_idle_slots_kv_to_host_memory_and_frees_their_cells(model_path: str):
    with started(model_path, n_ctx=3072, n_parallel=3, park_idle_slots=True) as eng:
        a = prompt_of(eng, "Conversation A about rivers and mills. " * 12)
        b = prompt_of(eng, "Conversation B about stars and comets. " * 12)
        c = prompt_of(eng, "Conversation C about bread and ovens. " * 12)
        first, _ = run(eng, GenerationRequest(a, GREEDY, max_tokens=4, id_slot=0, session="A"))
        run(eng, GenerationRequest(b, GREEDY, max_tokens=2, id_slot=1, session="B"))
        run(eng, GenerationRequest(c, GREEDY, max_tokens=2, id_slot=2, session="C"))
        slots = {s.id: s for s in eng.slots()}
        # C's task parked every idle slot, also B's, released last: their KV is in host
        # memory, their cells are free, and each slot still belongs to its conversation.
        assert slots[0].n_cached == 0 and slots[1].n_cached == 0
        assert slots[2].n_cached > len(c) // 2
        for i in (0, 1):
            assert eng.call(lambda i=i: parts_of(eng).model.seq_pos_max(i)).result(timeout=30) == -1
        assert (
            parts_of(eng).scheduler.slots[0].session == "A"
            and parts_of(eng).scheduler.slots[1].session == "B"
        )
        text, again = run(eng, GenerationRequest(a.copy(), GREEDY, max_tokens=4, session="A"))
        assert again.timings.cache_source == "host"
        assert again.cached_tokens == len(a) - 1
        # The restored slot is the one serving A (parking never takes the admitted slot's KV):
        # the same reply, and its KV holds the whole prompt.
        assert text == first
        assert {s.id: s for s in eng.slots()}[0].n_cached >= len(a)


@pytest.mark.parametrize(("threshold", "compactions"), [(0.1, 1), (-1.0, 0)])
def test_a_cut_that_frees_cells_under_kept_ones_compacts_the_kv_which_still_serves(
    model_path: str, threshold: float, compactions: int
):
    with started(model_path, n_ctx=2048, n_parallel=2, defrag_thold=threshold, warmup=False) as eng:
        a = prompt_of(eng, "Conversation A about rivers and mills. " * 90)  # ~630 tokens
        b = prompt_of(eng, "Conversation B about stars and comets. " * 3)
        c = prompt_of(eng, "Conversation C about bread and ovens. " * 3)
        run(eng, GenerationRequest(a, GREEDY, max_tokens=2, id_slot=0))
        first, _ = run(eng, GenerationRequest(b, GREEDY, max_tokens=4, id_slot=1))
        assert parts_of(eng).compactor.compactions == 0  # B's cells went in above A's
        # C takes A's slot: A's ~630 cells go, and B's sit above the hole.
        run(eng, GenerationRequest(c, GREEDY, max_tokens=2, id_slot=0))
        assert parts_of(eng).compactor.compactions == compactions
        text, again = run(eng, GenerationRequest(b.copy(), GREEDY, max_tokens=4, id_slot=1))
        assert again.cached_tokens == len(b)  # slot 1's KV, moved or not, is whole
        assert text == first


def test_a_long_prefill_parks_an_idle_slot_as_it_is_and_its_next_turn_restores_it(
    model_path: str,
):
    # Its next-turn boundary stays pending (no idle time comes): parking saves the slot without
    # decoding it, and the conversation's next turn computes it with its own tokens.
    config = {"n_ctx": 4096, "n_parallel": 2, "park_idle_slots": True, "idle_prefill_delay": 600.0}
    with started(model_path, **config) as eng:
        a = prompt_of(eng, "Conversation A about rivers and mills. " * 12)
        cont = [eng.tokenizer.eos, 198, 42]
        run(eng, GenerationRequest(a.copy(), GREEDY, max_tokens=3, id_slot=0, continuation=cont))
        held = eng.slots()[0].n_cached
        assert held == len(a) + 2  # the prompt, the two decoded tokens; the third is pending
        long = prompt_of(eng, "Conversation B about stars and comets. " * 40)
        assert len(long) >= LONG_PREFILL_MIN
        run(eng, GenerationRequest(long, GREEDY, max_tokens=2, id_slot=1))
        assert eng.slots()[0].n_cached == 0
        best = parts_of(eng).reuse.host.best
        saved = eng.call(lambda: list(best(eng.keyed(""), a)[0].tokens)).result(timeout=30)
        assert len(saved) == held
        turn = TokenSequence([*saved, *cont, *prompt_of(eng, " And the weirs?").tokens])
        _, again = run(eng, GenerationRequest(turn, GREEDY, max_tokens=2, id_slot=0))
        assert again.timings.cache_source == "host" and again.cached_tokens == held


def test_an_idle_engine_readies_the_buffer_its_next_park_saves_into(model_path: str):
    config = {"n_ctx": 4096, "n_parallel": 2, "park_idle_slots": True, "idle_prefill_delay": 600.0}
    with started(model_path, **config) as eng:
        a = prompt_of(eng, "Conversation A about rivers and mills. " * 12)
        run(eng, GenerationRequest(a, GREEDY, max_tokens=2, id_slot=0))
        pool = parts_of(eng).reuse.host.pool
        eventually(lambda: pool.warmed == 1, "the idle engine to ready slot 0's save buffer")
        allocated, reused = pool.allocated, pool.reused
        long = prompt_of(eng, "Conversation B about stars and comets. " * 40)
        run(eng, GenerationRequest(long, GREEDY, max_tokens=2, id_slot=1))
        assert eng.slots()[0].n_cached == 0  # parked, saved into the ready buffer
        assert pool.allocated == allocated and pool.reused == reused + 1
        _, again = run(eng, GenerationRequest(a.copy(), GREEDY, max_tokens=2, id_slot=0))
        assert again.timings.cache_source == "host" and again.cached_tokens == len(a) - 1


def test_parking_an_idle_slot_never_evicts_a_host_entry(model_path: str):
    with started(model_path, n_ctx=4096, n_parallel=4, park_idle_slots=True) as eng:
        texts = ["rivers and mills", "stars and comets", "bread and ovens", "ships and ports"]
        prompts = [prompt_of(eng, f"Conversation about {t}. " * 12) for t in texts]
        run(eng, GenerationRequest(prompts[0], GREEDY, max_tokens=2, id_slot=0))
        size = eng.call(lambda: parts_of(eng).model.state_size(0)).result(timeout=30)
        # Room for one saved slot, not two (set between steps, on the engine thread).
        host = parts_of(eng).reuse.host
        eng.call(lambda: setattr(host, "budget_bytes", size * 3 // 2)).result(30)
        for i in (1, 2):
            run(eng, GenerationRequest(prompts[i], GREEDY, max_tokens=2, id_slot=i))
        # The second task parked slot 0 (into the empty host cache); slot 1 had no room.
        slots = {s.id: s.n_cached for s in eng.slots()}
        assert slots[0] == 0 and slots[1] > 0 and parts_of(eng).reuse.snapshot().host.entries == 1
        run(eng, GenerationRequest(prompts[3], GREEDY, max_tokens=2, id_slot=3))
        # Slot 1 would need slot 0's entry evicted: it stays resident, and the entry stays.
        slots = {s.id: s.n_cached for s in eng.slots()}
        assert slots[1] > 0 and parts_of(eng).reuse.snapshot().host.entries == 1
        _, again = run(eng, GenerationRequest(prompts[0].copy(), GREEDY, max_tokens=2))
        assert again.timings.cache_source == "host"


def test_host_memory_budget_is_never_exceeded(model_path: str):
    budget = 3 << 20  # room for about one ~130-token state (23 KB a token)
    with started(model_path, n_ctx=1024, n_parallel=1, warmup=False, cache_ram_bytes=budget) as one:
        for topic in ("rivers", "stars", "bread", "ships"):
            run(
                one,
                GenerationRequest(
                    prompt_of(one, f"All about {topic}. " * 25), GREEDY, max_tokens=2
                ),
            )
            host = parts_of(one).reuse.snapshot().host
            assert host.bytes <= budget
        assert parts_of(one).reuse.snapshot().saves >= 2  # states were saved, old ones evicted


def test_kv_shifting_reuses_what_follows_a_removed_middle(model_path: str):
    """llama.cpp's cache_reuse: a prompt that drops a middle part (a chat trimming an old
    message) shifts the KV after it into place instead of recomputing it."""
    config = EngineConfig(
        model_path=model_path, n_ctx=1024, n_parallel=1, warmup=False, cache_reuse=16
    )
    shifting = Engine(config)
    shifting.start()
    try:
        tok = shifting.tokenizer.tokenize
        head = tok("Numbers: " + ", ".join(str(i) for i in range(1, 21)) + ",")
        middle = tok(" (an aside that will be removed later)", add_special=False)
        tail = tok(" " + ", ".join(str(i) for i in range(21, 51)) + ",", add_special=False)
        run(shifting, GenerationRequest(TokenSequence(head + middle + tail), GREEDY, max_tokens=2))
        trimmed = TokenSequence(head + tail)
        text, done = run(shifting, GenerationRequest(trimmed, GREEDY, max_tokens=3))
        # Without shifting only `head` would be reused; the shifted tail is reused too.
        assert done.cached_tokens == len(trimmed) - 1
        assert done.timings.prompt_n == 1
        assert text.lstrip().startswith("51")  # the shifted KV still reads as the numbers
    finally:
        shifting.stop()


def test_event_loop_wakes_once_per_step_for_all_streams_and_once_for_an_unstreamed_reply(
    engine: Engine,
):
    import threading

    prompt = prompt_of(engine, "Days of the week:")
    n = 8

    def request() -> GenerationRequest:
        return GenerationRequest(prompt.copy(), GREEDY, max_tokens=n, ignore_eos=True)

    async def measure() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        calls = 0
        original = loop.call_soon_threadsafe

        def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            nonlocal calls
            calls += 1
            return original(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        # Hold the engine between steps while both requests are submitted, so they are
        # admitted together and decode in the same steps.
        gate = threading.Event()
        held = engine.call(gate.wait)
        streams = [engine.open(request()), engine.open(request())]
        gate.set()
        await asyncio.wrap_future(held)
        counts = await asyncio.gather(*(count_events(s) for s in streams))
        streamed_calls = calls
        calls = 0
        unstreamed = engine.open(request(), streaming=False)
        n_unstreamed = await count_events(unstreamed)
        loop.call_soon_threadsafe = original  # type: ignore[method-assign]
        return streamed_calls, sum(counts), calls if n_unstreamed > 2 else -1

    streamed_calls, n_events, unstreamed_calls = asyncio.run(measure())
    assert streamed_calls <= n + 2 < n_events  # one wake-up per step, not per token per stream
    assert unstreamed_calls == 1  # every delta and the end in one hand-over


async def count_events(stream) -> int:  # noqa: ANN001
    n = 0
    async for _ in stream:
        n += 1
    return n


def test_a_request_stops_at_its_share_of_the_kv_and_the_limits_apply(model_path: str):
    config = EngineConfig(model_path=model_path, n_ctx=256, n_parallel=2, warmup=False)
    small = Engine(config)
    small.start()
    try:
        prompt = prompt_of(small, "Tell me everything.")
        request = GenerationRequest(prompt.copy(), GREEDY, ignore_eos=True)
        _, done = run(small, request)
        assert done.finish_reason == "length"
        assert len(prompt) + done.completion_tokens <= 256 // 2
        with pytest.raises(RequestError, match="128"):
            small.validate(GenerationRequest(TokenSequence([1] * 200)))
        parts_of(small).config.n_predict = 5  # a default (llama-server's -n) ...
        asked = GenerationRequest(prompt.copy(), GREEDY, max_tokens=50)
        small.validate(asked)
        assert asked.max_tokens == 50
        default = GenerationRequest(prompt.copy(), GREEDY)
        small.validate(default)
        assert default.max_tokens == 5
        parts_of(small).config.max_tokens_limit = 7  # ... and ours, a cap
        capped = GenerationRequest(prompt.copy(), GREEDY, max_tokens=50)
        small.validate(capped)
        assert capped.max_tokens == 7
    finally:
        small.stop()


def test_an_idle_engine_waits_for_a_request_still_arriving_and_prefills_both_at_once(
    model_path: str,
):
    # A long burst wait: the wait ends because the second request is submitted, not by time.
    with started(model_path, n_ctx=1024, n_parallel=2, burst_wait=600.0) as eng:
        first = prompt_of(eng, "A list of rivers:")
        second = prompt_of(eng, "Three colours of the sea:")

        async def burst() -> None:
            ticket = eng.expect_arrival()  # the second is still being read by the HTTP layer
            one = asyncio.create_task(collect(eng, GenerationRequest(first, GREEDY, max_tokens=2)))
            # The first is admitted: the idle engine now waits for the second to arrive.
            await eventually_async(
                lambda: any(s.state != "idle" for s in eng.slots()), "the first to be admitted"
            )
            stream = eng.open(GenerationRequest(second, GREEDY, max_tokens=2), arrival=ticket)
            assert eng.n_arriving == 0  # settled as the task was queued
            await one
            async for _ in stream:
                pass

        with decode_sizes(eng) as sizes:
            asyncio.run(asyncio.wait_for(burst(), timeout=120))
        assert sizes[0] == len(first) + len(second)  # one prefill of both prompts
        assert eng.n_arriving == 0


def test_a_request_still_arriving_never_holds_up_streams_being_decoded(model_path: str):
    # Three slots: one stays free for the request that never comes.
    with started(model_path, n_ctx=1536, n_parallel=3, burst_wait=600.0) as eng:
        prompt = prompt_of(eng, "Count to ten:")

        async def decode_while_one_arrives() -> tuple[int, str]:
            stream = eng.open(GenerationRequest(prompt, GREEDY, max_tokens=64, ignore_eos=True))
            events = aiter(stream)
            await anext(events)  # decoding now
            ticket = eng.expect_arrival()  # pending to the end: it never comes
            # Admitted beside the running stream: neither waits for the ticket.
            other = GenerationRequest(prompt_of(eng, "Name a bird:"), GREEDY, max_tokens=2)
            text, _ = await collect(eng, other)
            rest = [e async for e in events]
            ticket.settle()
            return len(rest), text

        # Waiting for the ticket would stall this for the 600 s burst wait.
        n_rest, text = asyncio.run(asyncio.wait_for(decode_while_one_arrives(), timeout=120))
        assert n_rest >= 2 and text


def test_a_ticket_never_settled_delays_an_idle_engine_by_the_burst_wait_at_most(
    model_path: str,
):
    with started(model_path, n_ctx=1024, n_parallel=2, burst_wait=0.2) as eng:
        ticket = eng.expect_arrival()  # a request whose body never comes
        text, done = run(eng, GenerationRequest(prompt_of(eng, "Hi"), GREEDY, max_tokens=3))
        assert done.completion_tokens == 3 and text
        ticket.settle()
