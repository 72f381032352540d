"""Per-request sampling: `SamplingParams` (plain data) and `Sampler` (a llama.cpp sampler chain).

The chain order follows llama.cpp's common sampler: logit bias -> penalties -> top_k -> top_p ->
min_p -> temperature -> dist. Temperature <= 0 is greedy (argmax after bias and penalties), which
makes replies reproducible and comparable with and without cache.
"""

from __future__ import annotations

import ctypes
import random
from collections.abc import Callable
from dataclasses import dataclass

import llama_cpp
import numpy as np


@dataclass(slots=True)
class SamplingParams:
    # None: the server's default (--temp), filled in when the request is validated.
    temperature: float | None = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    seed: int = -1  # -1: a random seed per request
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # GBNF grammar the reply must follow (response_format), as llama-server's grammar sampler.
    grammar: str | None = None
    # (token, bias) added to the token's logit before anything else (OpenAI's logit_bias);
    # -inf bans the token.
    # A text in place of a token (llama-server's) until the request is validated: each of its
    # tokens then (`token_biases`).
    logit_bias: tuple[tuple[int | str, float], ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature is not None and self.temperature <= 0.0

    @property
    def has_penalties(self) -> bool:
        return (
            self.repeat_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
        ) and self.repeat_last_n != 0


# llama_token_data: what llama.cpp's samplers read and reorder (id, logit, p).
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
# llama_logit_bias: a token and what is added to its logit.
_LOGIT_BIAS = np.dtype([("token", np.int32), ("bias", np.float32)])


class Sampler:
    """Owns one llama_sampler chain; `close()` frees it (the engine does when a request ends)."""

    def __init__(
        self,
        params: SamplingParams,
        n_vocab: int,
        n_ctx: int,
        vocab: llama_cpp.llama_vocab_p | None = None,
    ) -> None:
        # llama.cpp allocates the penalty window up front: an unbounded request value would ask
        # for gigabytes inside the engine thread. -1 means the whole context, as in llama-server.
        last_n = n_ctx if params.repeat_last_n < 0 else min(params.repeat_last_n, n_ctx)
        self.params = params
        self.last_n = last_n
        self._n_vocab = n_vocab
        # Greedy without a grammar or penalties is an argmax (of the biased logits): numpy over
        # the logits costs a fraction of the chain's n_vocab candidate array, on every token.
        self.argmax = params.greedy and not params.grammar and not params.has_penalties
        # One array for llama.cpp and the argmax (a long list is built at numpy's speed: this
        # runs on the engine thread).
        biases = np.array(list(params.logit_bias), dtype=_LOGIT_BIAS)
        self._bias_ids = biases["token"].astype(np.intp)
        self._bias = biases["bias"]
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = llama_cpp.llama_sampler_chain_add
        if params.grammar:
            # First in the chain: tokens the grammar forbids are out before any other sampler.
            grammar = llama_cpp.llama_sampler_init_grammar(vocab, params.grammar.encode(), b"root")
            if not grammar:
                llama_cpp.llama_sampler_free(chain)
                raise ValueError("the grammar of response_format could not be parsed")
            add(chain, grammar)
        if len(biases):  # llama.cpp copies the array: it need not outlive the call
            entries = biases.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_logit_bias))
            add(chain, llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(biases), entries))
        if params.has_penalties:
            add(
                chain,
                llama_cpp.llama_sampler_init_penalties(
                    n_vocab,
                    params.repeat_last_n,
                    params.repeat_penalty,
                    params.frequency_penalty,
                    params.presence_penalty,
                ),
            )
        if params.greedy:
            add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            if params.top_k > 0:
                add(chain, llama_cpp.llama_sampler_init_top_k(params.top_k))
            if params.top_p < 1.0:
                add(chain, llama_cpp.llama_sampler_init_top_p(params.top_p, 1))
            if params.min_p > 0.0:
                add(chain, llama_cpp.llama_sampler_init_min_p(params.min_p, 1))
            add(chain, llama_cpp.llama_sampler_init_temp(params.temperature))
            seed = params.seed if params.seed >= 0 else random.getrandbits(32)
            add(chain, llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        self._chain = chain

    def accept_prompt(self, tokens: list[int]) -> None:
        """Feed prompt tokens to the penalty window, as llama-server does."""
        if not self.params.has_penalties:
            return
        for token in tokens[-self.last_n :]:
            llama_cpp.llama_sampler_accept(self._chain, token)

    def sample(self, ctx: llama_cpp.llama_context_p, batch_index: int) -> int:
        """Sample from the logits of batch row `batch_index`; also accepts the token."""
        if self.argmax:
            ptr = llama_cpp.llama_get_logits_ith(ctx, batch_index)
            return self._biased_argmax(np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)))
        return llama_cpp.llama_sampler_sample(self._chain, ctx, batch_index)

    def sample_logits(self, logits: np.ndarray) -> int:
        """Sample from logits held outside the context (a slot's kept ones), exactly as
        llama_sampler_sample does from the context's: the chain picks from every token's
        logit, then accepts its pick."""
        if self.argmax:
            return self._biased_argmax(logits)
        data = np.empty(self._n_vocab, dtype=_TOKEN_DATA)
        data["id"] = np.arange(self._n_vocab, dtype=np.int32)
        data["logit"] = logits
        data["p"] = 0.0
        candidates = llama_cpp.llama_token_data_array(
            data.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
            self._n_vocab,
            -1,
            False,
        )
        llama_cpp.llama_sampler_apply(self._chain, ctypes.byref(candidates))
        # The samplers reorder and shrink the candidates inside this same buffer.
        token = int(data["id"][candidates.selected])
        llama_cpp.llama_sampler_accept(self._chain, token)
        return token

    def _biased_argmax(self, logits: np.ndarray) -> int:
        """The first maximum on a tie, as llama.cpp's greedy sampler."""
        if len(self._bias):  # on a copy: logprobs read the raw logits afterwards
            logits = logits.copy()
            np.add.at(logits, self._bias_ids, self._bias)  # a repeated id adds up
        return int(logits.argmax())

    def close(self) -> None:
        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None


def token_biases(
    pairs: tuple[tuple[int | str, float], ...], tokenize: Callable[[str], list[int]]
) -> tuple[tuple[int | str, float], ...]:
    """The biases with each text's tokens in its place (tokenized as llama-server does: no
    special tokens added, none parsed)."""
    if not any(isinstance(key, str) for key, _ in pairs):
        return pairs
    out: list[tuple[int | str, float]] = []
    for key, bias in pairs:
        out += [(t, bias) for t in tokenize(key)] if isinstance(key, str) else [(key, bias)]
    return tuple(out)


def fold_biases(
    pairs: tuple[tuple[int | str, float], ...],
) -> tuple[tuple[int | str, float], ...]:
    """Each token once, its biases added up (as llama.cpp adds a repeated token's), in the
    order tokens first appear: a list of any length becomes at most one entry per token."""
    folded: dict[int | str, float] = {}
    for key, bias in pairs:
        folded[key] = folded.get(key, 0.0) + bias
    return tuple(folded.items())
