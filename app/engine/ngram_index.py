"""`NgramIndex`: a token history and, for each n-gram in it, where its latest occurrence ended.

The draft source of n-gram speculation (app/engine/speculator.py): the tokens that followed the
latest earlier occurrence of the history's last n tokens are a guess at what comes next. An
answer that quotes its prompt (a document, the conversation, code) repeats long runs of it.

Invariant: `_ends` maps every n-gram of `tokens` except the one the history ends on (the tail,
whose continuation is what we look for) to the end index of its latest occurrence; after
`seal()` the tail's n-gram is in it too (a finished reply, read by later requests).
Media placeholders (negative ids) never match a generated token, so they are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class NgramIndex:
    def __init__(self, n: int, tokens: Iterable[int] = ()) -> None:
        if n < 1:
            raise ValueError("n-gram size must be at least 1")
        self.n = n
        self.tokens: list[int] = []
        self._ends: dict[tuple[int, ...], int] = {}
        self._indexed = 0  # n-grams ending at or before this index are in `_ends`
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        self.tokens.extend(tokens)
        self._index_up_to(len(self.tokens) - 1)

    def seal(self) -> None:
        """Index the tail n-gram too: the history is complete (nothing is looked up for it)."""
        self._index_up_to(len(self.tokens))

    def _index_up_to(self, end: int) -> None:
        tokens, n, ends = self.tokens, self.n, self._ends
        for e in range(max(self._indexed + 1, n), end + 1):
            gram = tuple(tokens[e - n : e])
            if min(gram) >= 0:
                ends[gram] = e
        self._indexed = max(self._indexed, end)

    def match(self, history: Sequence[int], m: int, most: int) -> tuple[list[int], int]:
        """Up to m tokens that followed the latest indexed occurrence of `history`'s last n
        tokens, and the length of the run that occurrence shares with the end of `history`
        (n to `most`): how far back the two agree, the draft's evidence. ([], 0): none.
        `history` may be this index's own tokens (its tail is not indexed, so the occurrence
        found is an earlier one) or another's (a request's context against a past reply)."""
        n = self.n
        if len(history) < n or m <= 0:
            return [], 0
        end = self._ends.get(tuple(history[-n:]))
        if end is None:
            return [], 0
        tokens, length = self.tokens, n
        limit = min(most, end, len(history))
        while length < limit and tokens[end - length - 1] == history[-length - 1]:
            length += 1
        return tokens[end : end + m], length
