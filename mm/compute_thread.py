"""`ComputeThread`: the one thread allowed to run llama.cpp / mtmd graphs of a handle.

The llama.cpp build here runs its CPU kernels on OpenMP, which keeps a team of worker threads per
calling thread. A graph run from a second thread, even once, leaves two teams spinning on two
cores and GOMP throttles every later barrier into a futex sleep: every decode gets slower for the
life of the process (figures: docs/kv-reuse.md, Measurements). So every compute call of a handle
must come from one thread.

Invariant: the first compute call claims the handle for its thread; any compute call from another
thread afterwards raises `WrongThreadError` before touching llama.cpp. Calls that only read or
copy memory (tokenizing, state get/set, logits) are not compute calls and may come from anywhere
the handle's own locking allows.
"""

from __future__ import annotations

import threading


class WrongThreadError(RuntimeError):
    """A compute call from a thread other than the one that owns the handle."""


class ComputeThread:
    def __init__(self, what: str) -> None:
        self._what = what
        self._owner: int | None = None
        self._owner_name = ""
        self._lock = threading.Lock()

    @property
    def owner(self) -> int | None:
        """Thread ident of the owner, None before the first compute call."""
        return self._owner

    def claim(self) -> None:
        """Make the calling thread the owner now (before any compute call); raises if another
        thread already owns the handle."""
        self.check("claim")

    def check(self, call: str) -> None:
        """Raise unless the calling thread owns the handle (the first caller becomes owner)."""
        me = threading.get_ident()
        if self._owner == me:
            return
        with self._lock:
            if self._owner is None:
                self._owner = me
                self._owner_name = threading.current_thread().name
                return
        raise WrongThreadError(
            f"{self._what}.{call} called from thread {threading.current_thread().name!r}; "
            f"its compute belongs to thread {self._owner_name!r} (one OpenMP team per process)"
        )
