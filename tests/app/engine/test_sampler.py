from __future__ import annotations

import numpy as np

from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model
from app.engine.sampler import Sampler, SamplingParams, fold_biases


def test_penalty_window_is_clamped_to_the_context():
    huge = Sampler(SamplingParams(frequency_penalty=0.5, repeat_last_n=2**31 - 1), 49152, 2048)
    whole = Sampler(SamplingParams(frequency_penalty=0.5, repeat_last_n=-1), 49152, 2048)
    small = Sampler(SamplingParams(frequency_penalty=0.5, repeat_last_n=16), 49152, 2048)
    try:
        assert huge.last_n == 2048
        assert whole.last_n == 2048  # -1 = the whole context, as in llama-server
        assert small.last_n == 16
    finally:
        for s in (huge, whole, small):
            s.close()


def test_greedy_and_penalty_flags():
    assert SamplingParams(temperature=0).greedy
    assert not SamplingParams().has_penalties
    assert SamplingParams(repeat_penalty=1.1).has_penalties
    assert not SamplingParams(repeat_penalty=1.1, repeat_last_n=0).has_penalties


def test_plain_greedy_is_the_argmax_the_sampler_chain_would_pick(model_path: str):
    """The numpy fast path must pick what llama.cpp's greedy sampler picks, token after token;
    anything applied before the choice (penalties, a grammar) keeps the chain."""
    model = Model(EngineConfig(model_path=model_path, n_ctx=256, n_parallel=1))
    fast = Sampler(SamplingParams(temperature=0), model.n_vocab, model.n_ctx, model.vocab)
    chain = Sampler(SamplingParams(temperature=0), model.n_vocab, model.n_ctx, model.vocab)
    chain.argmax = False  # the same params through llama.cpp's chain
    # Biases that change the choice at some steps: the greedy token banned at the first one,
    # and one token pushed up (twice: repeated entries add up, as in llama.cpp).
    biased = SamplingParams(temperature=0, logit_bias=((13, 7.0), (13, 7.0), (1, float("-inf"))))
    fast_biased = Sampler(biased, model.n_vocab, model.n_ctx, model.vocab)
    chain_biased = Sampler(biased, model.n_vocab, model.n_ctx, model.vocab)
    chain_biased.argmax = False
    penalised = Sampler(SamplingParams(temperature=0, repeat_penalty=1.3), model.n_vocab, 256)
    grammar = Sampler(
        SamplingParams(temperature=0, grammar='root ::= "yes"'), model.n_vocab, 256, model.vocab
    )
    batch = model.new_batch()
    try:
        assert fast.argmax and fast_biased.argmax
        assert not penalised.argmax and not grammar.argmax
        tokens = model.tokenize("The capital of France is")
        for i, token in enumerate(tokens):
            row = batch.add(token, i, 0, i == len(tokens) - 1)
        picked, changed = [], 0
        for pos in range(len(tokens), len(tokens) + 8):
            assert model.decode(batch) == 0
            token = fast.sample(model.ctx, row)
            assert token == chain.sample(model.ctx, row)
            biased_pick = fast_biased.sample(model.ctx, row)
            assert biased_pick == chain_biased.sample(model.ctx, row)
            changed += biased_pick != token
            picked.append(token)
            batch.clear()
            row = batch.add(token, pos, 0, True)
        assert len(set(picked)) > 1  # a real continuation, not one token over and over
        assert changed  # the biases mattered somewhere
    finally:
        batch.close()
        for s in (fast, chain, penalised, grammar, fast_biased, chain_biased):
            s.close()
        model.close()


def test_sampling_kept_logits_picks_what_the_context_rows_would(model_path: str):
    """`sample_logits` (an exact repeat's first token, from a slot's kept logits) must pick
    what `sample` picks from the context's row, for every kind of chain and seed, and accept
    its pick the same way (the next picks agree too)."""
    model = Model(EngineConfig(model_path=model_path, n_ctx=256, n_parallel=1))
    kinds = [
        SamplingParams(temperature=0),  # numpy argmax
        SamplingParams(temperature=0, repeat_penalty=1.3, logit_bias=((13, 9.0),)),  # chain
        SamplingParams(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=7),
        SamplingParams(temperature=1.0, seed=11, frequency_penalty=0.7),
        SamplingParams(temperature=0.9, seed=3, grammar="root ::= [0-9]+"),
    ]
    pairs = [
        tuple(Sampler(p, model.n_vocab, model.n_ctx, model.vocab) for _ in range(2)) for p in kinds
    ]
    batch = model.new_batch()
    try:
        tokens = model.tokenize("Count with me: one, two, three,")
        for i, token in enumerate(tokens):
            row = batch.add(token, i, 0, i == len(tokens) - 1)
        assert model.decode(batch) == 0
        kept = model.logits(row).copy()
        picks: list[list[int]] = [[] for _ in kinds]
        for _ in range(6):  # the same logits again: seeded draws move on, penalties build up
            for (from_ctx, from_kept), out in zip(pairs, picks, strict=True):
                token = from_ctx.sample(model.ctx, row)
                assert from_kept.sample_logits(kept) == token
                out.append(token)
        assert any(len(set(p)) > 1 for p in picks)  # not one token over and over
        assert model.token_text(picks[-1][0]).strip().isdigit()  # the grammar held
    finally:
        batch.close()
        for pair in pairs:
            for s in pair:
                s.close()
        model.close()


def test_biases_fold_to_one_entry_per_token_adding_up_as_llama_cpp_does():
    pairs = ((5, 1.0), (7, -2.0), (5, 0.5), (9, float("-inf")), (9, 3.0), (7, -2.0))
    assert fold_biases(pairs) == ((5, 1.5), (7, -4.0), (9, float("-inf")))
    assert fold_biases(()) == ()
    many = tuple((i % 100, 0.25) for i in range(1_000_000))  # a list of any length
    assert fold_biases(many) == tuple((i, 2500.0) for i in range(100))


def test_a_sampler_takes_a_bias_for_every_token_of_the_vocabulary():
    """Every token but one banned, by a list as long as the vocabulary: the chain (sampling)
    and the argmax (greedy) both leave only that one."""
    n_vocab, kept = 49152, 123
    bans = tuple((t, float("-inf")) for t in range(n_vocab) if t != kept)
    logits = np.random.default_rng(0).normal(size=n_vocab).astype(np.float32)
    for temperature in (0.7, 0.0):
        sampler = Sampler(SamplingParams(temperature=temperature, logit_bias=bans), n_vocab, 256)
        try:
            assert sampler.argmax == (temperature == 0.0)
            assert sampler.sample_logits(logits) == kept
        finally:
            sampler.close()
