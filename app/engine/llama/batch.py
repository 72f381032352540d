"""`Batch`: a reusable llama_batch that the scheduler fills with tokens of several sequences."""

from __future__ import annotations

import llama_cpp


class Batch:
    """Fixed-capacity llama_batch. Invariant: 0 <= n_tokens <= capacity; one seq id per token."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.raw = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.n_tokens = 0

    def clear(self) -> None:
        self.n_tokens = 0
        self.raw.n_tokens = 0

    @property
    def free(self) -> int:
        return self.capacity - self.n_tokens

    def add(self, token: int, pos: int, seq_id: int, logits: bool) -> int:
        """Append one token; returns its index (the row of its logits when `logits`)."""
        i = self.n_tokens
        if i >= self.capacity:
            raise IndexError("batch is full")
        raw = self.raw
        raw.token[i] = token
        raw.pos[i] = pos
        raw.n_seq_id[i] = 1
        raw.seq_id[i][0] = seq_id
        raw.logits[i] = logits
        self.n_tokens = i + 1
        raw.n_tokens = i + 1
        return i

    def add_run(self, tokens: list[int], pos: int, seq_id: int) -> None:
        """Append tokens at consecutive positions from `pos`, none asking for logits."""
        for i, token in enumerate(tokens):
            self.add(token, pos + i, seq_id, False)

    def close(self) -> None:
        if self.raw is not None:
            llama_cpp.llama_batch_free(self.raw)
            self.raw = None
