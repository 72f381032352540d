"""`BackgroundPacer`: how many tokens one background llama_decode may carry.

A llama_decode cannot be interrupted, so a client request that arrives while background work
(a document's prefill, an idle slot's next-turn boundary) is being computed waits for that batch
to end. The pacer sizes background batches so that one takes at most `budget_s`: it keeps a
running estimate of the background prefill rate (tokens per second, measured on the batches it
sized; a slower batch lowers it at once, faster ones raise it gradually) and gives
`rate * budget_s` tokens, between `MIN_TOKENS` and the batch capacity. The
rate depends on the machine, the model and the context already held, so it is measured, never
assumed; the first batch is `MIN_TOKENS`. The ingestion worker paces its embedding batches (in
chunks, not tokens) with one too.
"""

from __future__ import annotations

from dataclasses import dataclass

# Fewer tokens per batch than this cost mostly the decode's fixed overhead.
MIN_TOKENS = 8
# Weight of the newest batch in the rate estimate.
SMOOTHING = 0.3


@dataclass(slots=True)
class BackgroundPacer:
    budget_s: float  # longest one background batch should take (> 0)
    capacity: int  # the batch's size (-b)
    rate: float = 0.0  # tokens per second of recent background batches; 0: not measured yet
    minimum: int = MIN_TOKENS  # fewest tokens (or items) in a batch

    def tokens(self) -> int:
        """Tokens the next background batch may carry."""
        least = min(self.minimum, self.capacity)
        if self.rate <= 0:
            return least
        return max(least, int(min(self.capacity, self.rate * self.budget_s)))

    def observe(self, n_tokens: int, seconds: float) -> None:
        """A background batch of `n_tokens` took `seconds` of llama_decode."""
        if n_tokens <= 0 or seconds <= 0:
            return
        rate = n_tokens / seconds
        if self.rate <= 0 or rate < self.rate:
            # Slower than expected (the cores are shared, the context grew): the next batch
            # shrinks at once, or a client arriving then would wait for one over the budget.
            self.rate = rate
        else:
            self.rate = (1 - SMOOTHING) * self.rate + SMOOTHING * rate
