"""ComputeThread: the first compute call claims the handle; other threads are refused."""

from __future__ import annotations

import threading

import pytest

from mm.compute_thread import ComputeThread, WrongThreadError


def run_in_thread(fn) -> BaseException | None:
    error: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 (handed back to the test)
            error.append(e)

    t = threading.Thread(target=target, name="other")
    t.start()
    t.join()
    return error[0] if error else None


def test_first_caller_owns_and_others_are_refused():
    guard = ComputeThread("Thing")
    assert guard.owner is None
    guard.check("decode")
    guard.check("decode")  # the owner again: fine
    assert guard.owner == threading.get_ident()
    error = run_in_thread(lambda: guard.check("decode"))
    assert isinstance(error, WrongThreadError)
    assert "Thing.decode" in str(error) and "'other'" in str(error)


def test_a_claim_from_another_thread_sticks():
    guard = ComputeThread("Thing")
    assert run_in_thread(guard.claim) is None
    with pytest.raises(WrongThreadError):
        guard.check("decode")
