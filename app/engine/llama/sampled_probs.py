"""Probabilities after the sampling settings (llama-server's `post_sampling_probs`): what the
sampler's stages leave of a step's distribution, and the chance each token had of being drawn.

The stages run in the sampler's order (app/engine/sampler.py): logit bias, top_k, top_p, min_p,
then temperature, and the softmax over the tokens left. Penalties are not replayed: they change
the logits by the reply so far, which this view of one row does not hold. A greedy request
draws its token with probability 1, the only one left.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.engine.events import TokenLogprob
from app.engine.sampler import SamplingParams


def sampled_probs(
    row: np.ndarray,
    token: int,
    n_top: int,
    params: SamplingParams,
    piece: Callable[[int], bytes],
) -> TokenLogprob:
    """The drawn token's probability and the n_top likeliest tokens left, in `logprob` and
    `top` (probabilities, not logs: the writer names them so)."""
    ids, probs = _distribution(row.astype(np.float64), params, token)

    def entry(t: int, p: float) -> tuple[str, float, list[int]]:
        raw = piece(t)
        return raw.decode("utf-8", "replace"), p, list(raw)

    order = np.argsort(-probs, kind="stable")[:n_top]
    top = [entry(int(ids[i]), float(probs[i])) for i in order if probs[i] > 0.0]
    chosen = np.flatnonzero(ids == token)
    p = float(probs[chosen[0]]) if chosen.size else 0.0
    text, _, raw = entry(token, p)
    return TokenLogprob(text, p, raw, top, token, [int(ids[i]) for i in order if probs[i] > 0.0])


def _distribution(
    logits: np.ndarray, params: SamplingParams, token: int
) -> tuple[np.ndarray, np.ndarray]:
    """The token ids left after the stages and their probabilities."""
    if params.greedy:
        return np.array([token]), np.array([1.0])
    for t, bias in params.logit_bias:
        logits[int(t)] += bias
    ids = np.flatnonzero(np.isfinite(logits))
    values = logits[ids]
    if 0 < params.top_k < values.size:
        keep = np.argpartition(-values, params.top_k - 1)[: params.top_k]
        ids, values = ids[keep], values[keep]
    order = np.argsort(-values, kind="stable")
    ids, values = ids[order], values[order]
    if params.top_p < 1.0:
        cumulative = np.cumsum(_softmax(values))
        n = int(np.searchsorted(cumulative, params.top_p) + 1)
        ids, values = ids[:n], values[:n]
    if params.min_p > 0.0:
        keep = values >= values[0] + np.log(params.min_p)
        ids, values = ids[keep], values[keep]
    assert params.temperature is not None  # filled in when the request was validated
    return ids, _softmax(values / params.temperature)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()
