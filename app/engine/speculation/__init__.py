"""Speculative decoding: `Speculator` (n-gram drafts from the prompt and from earlier replies),
the draft state of a task, the draft cost model, the n-gram index, the reply memory."""
