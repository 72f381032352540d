"""`StepCost`: what one more llama_decode costs, in prompt tokens' worth, measured.

A step's time is about a fixed part (the weights read once, the graph built and run, the
engine's own work around it) plus a part per token. When a prompt's prefill ends inside a step,
the prompts behind it could fill the rest of the batch; but its first token then waits for their
tokens too. Ending the step there instead costs the prompts behind one more step's fixed part.
The scheduler weighs the two with the ratio measured here (`overhead_tokens`, `ends_step`): on
this machine a step's fixed part is worth a few prompt tokens (ending the step pays); where a
token costs far less than a step, as on a GPU, filling the batch pays.

Measured from the engine's own steps, never assumed: a running mean of the time of small steps
(a few tokens: mostly the fixed part) and of large ones (mostly the tokens); the difference over
the difference in tokens is a token's cost. Until both were timed, PRIOR_TOKENS.

Engine thread only.
"""

from __future__ import annotations

from dataclasses import dataclass

# Steps of at most SMALL tokens time the fixed part; of at least LARGE, the tokens.
SMALL = 8
LARGE = 64
# A step's fixed part in prompt tokens before both kinds of step were timed (this machine's: a
# 1-token step ~9 ms, a 17-token prefill ~78 ms; docs/kv-reuse.md, Measurements).
PRIOR_TOKENS = 4.0
WEIGHT = 0.2  # of each new step in the running means
# Fewest tokens of the prompts behind worth ending a step for. A step's cost outside llama_decode
# (planning, sampling, handing a first token to the event loop) is not timed here, and short
# prompts sent at once are better prefilled in one step (docs/kv-reuse.md, Measurements: four
# ~13-token prompts); a few hundred tokens behind a long prompt delay its first token by ~1 s.
MIN_END = LARGE


@dataclass(slots=True)
class _Mean:
    tokens: float = 0.0
    seconds: float = 0.0
    n: int = 0

    def add(self, tokens: int, seconds: float) -> None:
        w = 1.0 if self.n == 0 else WEIGHT
        self.tokens += w * (tokens - self.tokens)
        self.seconds += w * (seconds - self.seconds)
        self.n += 1


@dataclass(slots=True)
class StepCost:
    small: _Mean | None = None
    large: _Mean | None = None

    def observe(self, n_tokens: int, seconds: float) -> None:
        """A llama_decode of `n_tokens` tokens took `seconds`."""
        if seconds <= 0 or SMALL < n_tokens < LARGE:
            return
        if n_tokens <= SMALL:
            self.small = self.small or _Mean()
            self.small.add(n_tokens, seconds)
        else:
            self.large = self.large or _Mean()
            self.large.add(n_tokens, seconds)

    def overhead_tokens(self) -> float:
        """A step's fixed cost over one token's: how many prompt tokens one more step is worth."""
        small, large = self.small, self.large
        if small is None or large is None or large.tokens <= small.tokens:
            return PRIOR_TOKENS
        per_token = (large.seconds - small.seconds) / (large.tokens - small.tokens)
        if per_token <= 0:  # a noisy pair (the machine's speed moved): a token costs ~nothing
            return float("inf")
        return max(small.seconds - per_token * small.tokens, 0.0) / per_token

    def ends_step(self, behind: list[int], room: int) -> bool:
        """A prompt's prefill ends in a step with `room` tokens of the batch left, and prompts
        with `behind` tokens each to prefill (in order) could fill it. Filling the room delays
        that prompt's first token by their tokens; ending the step there costs each of the k
        prompts that would have had some of the room one more step. True: end the step (never
        for fewer than MIN_END tokens)."""
        tokens = k = 0
        for n in behind:
            if tokens >= room:
                break
            n = min(room - tokens, n)
            if n > 0:
                tokens, k = tokens + n, k + 1
        return tokens >= MIN_END and tokens > k * self.overhead_tokens()
