"""eventually(): the one way tests wait for something another thread or process does.

A test polls a condition instead of sleeping a fixed time: the wait ends as soon as the
condition holds, on a fast machine or a slow one. The timeout is a hang guard (a wait that
never ends fails with the last value seen), not a timing threshold, so it is generous.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

HANG_GUARD_S = 300.0  # long enough for a model load on a busy CI machine; only a hang reaches it
INTERVAL_S = 0.05


class NeverHappened(AssertionError):
    """The condition did not hold before the hang guard ran out."""


def eventually(
    check: Callable[[], T],
    what: str,
    timeout: float = HANG_GUARD_S,
    interval: float = INTERVAL_S,
) -> T:
    """check()'s first truthy value; an AssertionError from check counts as "not yet".

    what names the awaited condition for the failure message, which shows the last value
    check returned (or the last assertion it raised).
    """
    deadline = time.monotonic() + timeout
    while True:
        last = _try(check)
        if not isinstance(last, AssertionError) and last:
            return last
        if time.monotonic() >= deadline:
            raise NeverHappened(_message(what, timeout, last))
        time.sleep(interval)


async def eventually_async(
    check: Callable[[], T] | Callable[[], Awaitable[T]],
    what: str,
    timeout: float = HANG_GUARD_S,
    interval: float = INTERVAL_S,
) -> T:
    """eventually() for a test running on an event loop: it yields to the loop between polls."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            last = check()
            if isinstance(last, Awaitable):
                last = await last
        except AssertionError as e:
            last = e
        if not isinstance(last, AssertionError) and last:
            return last  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise NeverHappened(_message(what, timeout, last))
        await asyncio.sleep(interval)


def _try(check: Callable[[], T]) -> T | AssertionError:
    try:
        return check()
    except AssertionError as e:
        return e


def _message(what: str, timeout: float, last: object) -> str:
    return f"still waiting for {what} after {timeout:.0f} s; last value: {last!r}"
