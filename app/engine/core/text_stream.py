"""`TextStream`: token bytes in, text out; never splits a UTF-8 character, never leaks a stop.

Bytes go through the standard library's incremental UTF-8 decoder, so a character spread over
several tokens is emitted once it is whole. Text that might be the start of a stop string is held
back until it is known not to be one; text from a stop string onwards is never emitted.
"""

from __future__ import annotations

import codecs


class TextStream:
    def __init__(self, stop: list[str] | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = [s for s in (stop or []) if s]
        self._pending = ""  # decoded but not emitted: always shorter than the longest stop string
        self.stop_hit: str | None = None

    def push(self, piece: bytes) -> str:
        """Add one token's bytes; return the text that can be emitted now."""
        if self.stop_hit is not None:
            return ""
        self._pending += self._decoder.decode(piece)
        return self._release(final=False)

    def finish(self) -> str:
        """End of generation: flush what is held back (a partial stop match is plain text)."""
        if self.stop_hit is not None:
            return ""
        self._pending += self._decoder.decode(b"", final=True)
        return self._release(final=True)

    def _release(self, final: bool) -> str:
        pending = self._pending
        cut = -1
        for stop in self._stops:
            i = pending.find(stop)
            if i >= 0 and (cut < 0 or i < cut):
                cut, self.stop_hit = i, stop
        if cut >= 0:
            self._pending = ""
            return pending[:cut]
        hold = 0 if final else self._held_suffix(pending)
        self._pending = pending[len(pending) - hold :] if hold else ""
        return pending[: len(pending) - hold]

    def _held_suffix(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best
