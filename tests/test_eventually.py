"""eventually(): returns the first truthy value, treats an AssertionError as "not yet", and
fails with the last value seen once the hang guard runs out."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.eventually import NeverHappened, eventually, eventually_async


def test_the_first_truthy_value_is_returned():
    counter = itertools.count()
    assert eventually(lambda: max(next(counter) - 2, 0), "the count", interval=0) == 1


def test_an_assertion_error_means_not_yet():
    calls = itertools.count()

    def check() -> str:
        assert next(calls) >= 2, "too early"
        return "now"

    assert eventually(check, "the third call", interval=0) == "now"


def test_a_condition_that_never_holds_fails_with_the_last_value():
    with pytest.raises(NeverHappened, match=r"the impossible .* last value: \[\]"):
        eventually(lambda: [], "the impossible", timeout=0, interval=0)
    with pytest.raises(NeverHappened, match="last value: AssertionError\\('no'"):
        eventually(_refuse, "x", timeout=0)


def test_other_errors_are_not_swallowed():
    with pytest.raises(KeyError):
        eventually(lambda: {}["missing"], "a key", timeout=0)


def test_the_async_twin_awaits_and_yields_to_the_loop():
    async def run() -> object:
        seen: list[int] = []
        loop = asyncio.get_running_loop()
        for i in range(3):
            loop.call_soon(seen.append, i)  # runs only while eventually_async yields
        return await eventually_async(lambda: len(seen) == 3 and seen, "the callbacks")

    assert asyncio.run(run()) == [0, 1, 2]


def _refuse() -> None:
    raise AssertionError("no")
