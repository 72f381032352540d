"""`NgramIndex`: a token history and, for each n-gram in it, where its occurrences ended.

The draft source of n-gram speculation (app/engine/speculation/speculator.py): the tokens that
followed an earlier occurrence of the history's last n tokens are a guess at what comes next. An
answer that quotes its prompt (a document, the conversation, code) repeats long runs of it.

Of several occurrences, the one that agrees with the history furthest back drafts: a common
3-gram's latest occurrence is often elsewhere in the text than the passage being quoted, whose
occurrence agrees over many more tokens (and is accepted far more often).

Invariant: `_ends` maps every n-gram of `tokens` except the one the history ends on (the tail,
whose continuation is what we look for) to the end indexes of its occurrences, in order; after
`seal()` the tail's n-gram is in it too (a finished reply, read by later requests).
Media placeholders (negative ids) never match a generated token, so they are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

SCAN = 32  # occurrences of an n-gram compared with the history, latest first (bounds a step)


class NgramIndex:
    def __init__(self, n: int, tokens: Iterable[int] = (), lead: int = 0) -> None:
        """`lead`: the first tokens are context only (what came before a reply): they count
        towards a match's agreement but are never drafted, so only n-grams ending at or after
        `lead` are indexed."""
        if n < 1:
            raise ValueError("n-gram size must be at least 1")
        self.n = n
        self.tokens: list[int] = []
        self._ends: dict[tuple[int, ...], list[int]] = {}
        self._indexed = max(lead - 1, 0)  # n-grams ending at or before this index are in `_ends`
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
                ends.setdefault(gram, []).append(e)
        self._indexed = max(self._indexed, end)

    def match(self, history: Sequence[int], m: int, most: int) -> tuple[list[int], int]:
        """Up to m tokens that followed an indexed occurrence of `history`'s last n tokens, and
        the length of the run that occurrence shares with the end of `history` (n to `most`):
        how far back the two agree, the draft's evidence. Of the latest `SCAN` occurrences, one
        with a draft, then the one that agrees longest, then the one with the longer draft, then
        the latest. ([], 0): none. `history` may be this index's own tokens (its tail is not
        indexed, so the occurrence found is an earlier one) or another's (a request's context
        against a past reply)."""
        n = self.n
        if len(history) < n or m <= 0:
            return [], 0
        ends = self._ends.get(tuple(history[-n:]))
        if not ends:
            return [], 0
        size = len(self.tokens)
        best_end, best = ends[-1], (False, 0, 0)
        for end in reversed(ends[-SCAN:]):
            drafted = min(m, size - end)
            score = (drafted > 0, self._agreement(history, end, most), drafted)
            if score > best:
                best_end, best = end, score
            if score == (True, most, m):
                break
        return self.tokens[best_end : best_end + m], best[1]

    def _agreement(self, history: Sequence[int], end: int, most: int) -> int:
        """How far back (n to `most`) the tokens before `end` equal the end of `history`."""
        tokens, length = self.tokens, self.n
        limit = min(most, end, len(history))
        while length < limit and tokens[end - length - 1] == history[-length - 1]:
            length += 1
        return length
