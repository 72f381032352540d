"""`TurnCache`: the exact tokens of recent chat turns, for clients that send the history back.

An OpenAI client sends the whole conversation every turn, with the model's replies as text.
Re-tokenized, a reply can differ from the ids the model generated, which ends the reusable
prefix at that reply. This keeps, for recent turns, the rendered text up to the end of the
reply and its exact tokens (prompt + generated ids); a new prompt whose text starts with such a
text reuses those tokens and tokenizes only the rest. Same text, same model input: only the
tokenization of earlier replies follows what the model produced.

Keys carry the tenant's cache salt. Thread-safe (used from the event loop and worker threads).
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable

# (tokens of `done`, done, text) -> tokens of text, which starts with done (Prompter.extend)
Extend = Callable[[list[int], str, str], list[int]]


class TurnCache:
    def __init__(self, max_entries: int = 512) -> None:  # prompts and prompt + reply, per turn
        self._max = max_entries
        self._entries: OrderedDict[str, tuple[str, str, array]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(salt: str, text: str) -> str:
        return hashlib.blake2b(f"{len(salt)}:{salt}{text}".encode(), digest_size=16).hexdigest()

    def remember(self, salt: str, text: str, tokens: list[int]) -> None:
        if self._max <= 0 or not text:
            return
        key = self._key(salt, text)
        with self._lock:
            self._entries[key] = (salt, text, array("i", tokens))
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def longest(self, salt: str, text: str) -> tuple[str, list[int]] | None:
        """The longest remembered turn under `salt` whose text is a prefix of `text`."""
        best: tuple[str, str, array] | None = None
        best_key = ""
        with self._lock:
            for key, entry in self._entries.items():
                longer = best is None or len(entry[1]) > len(best[1])
                if longer and entry[0] == salt and text.startswith(entry[1]):
                    best, best_key = entry, key
            if best is None:
                return None
            self._entries.move_to_end(best_key)
        return best[1], best[2].tolist()

    def tokens_of(self, salt: str, text: str, extend: Extend) -> list[int]:
        """The prompt's tokens: the longest remembered turn's, extended by the rest of the
        text (`extend(tokens, done, text)`; done "" tokenizes all). The prompt is remembered
        too, not only with its reply: the same prompt sent again (a retry, a regenerate, a
        repeated question) skips the tokenizer."""
        known = self.longest(salt, text)
        if known is not None and known[0] == text:
            return known[1]
        tokens = extend(known[1], known[0], text) if known is not None else extend([], "", text)
        self.remember(salt, text, tokens)
        return tokens

    def __len__(self) -> int:
        return len(self._entries)
