"""bench.cluster's accounting from made-up calls (no servers): shares and warm TTFT per setup,
and the kill -9 rounds' failures in flight and beyond, and the moved sessions."""

from __future__ import annotations

from bench.cluster import kill_summary, summary
from bench.workloads.cluster_workload import Call


def call(kind: str, key: str, rnd: int, t0: float, t1: float, ok: bool = True, **kw) -> Call:
    c = Call(kind, key, rnd, t0, t1, ok, **kw)
    if not ok:
        c.error = "RemoteProtocolError: cut"
    return c


def test_shares_sum_tokens_and_warm_ttft_is_turns_2_on():
    calls = [
        call("turn", "s", 1, 0, 1, ttft=2.0, prompt_tokens=100, cached_tokens=0),
        call("turn", "s", 2, 1, 2, ttft=0.4, prompt_tokens=120, cached_tokens=110),
        call("turn", "s", 3, 2, 3, ttft=0.2, prompt_tokens=140, cached_tokens=130),
        call("question", "c", 1, 0, 1, ttft=0.5, prompt_tokens=200, cached_tokens=150),
        call("turn", "t", 2, 0, 1, ok=False),
    ]
    s = summary(calls)
    assert (s["requests"], s["failed"]) == (5, 1)
    assert (s["prompt_tokens"], s["cached_tokens"]) == (560, 390)
    assert s["cached_share"] == 390 / 560
    assert s["warm_turn_share"] == 240 / 260
    assert s["question_share"] == 0.75
    assert abs(s["warm_ttft"] - 0.3) < 1e-9
    assert (s["first_turn_ttft"], s["question_ttft"]) == (2.0, 0.5)


def test_after_a_kill_failures_in_flight_are_told_apart_from_those_beyond():
    home = {"a": "replica-1", "b": "replica-1", "c": "replica-2", "col": "replica-1"}
    t_kill = 10.0
    calls = [
        call("turn", "a", 5, 9.9, 10.5, ok=False),  # in flight on the victim: cut
        call("turn", "c", 5, 9.5, 10.2, replica="replica-2", prompt_tokens=100, cached_tokens=95),
        call("turn", "b", 5, 9.0, 9.5, replica="replica-1", prompt_tokens=100, cached_tokens=90),
        call("question", "col", 5, 11.0, 12.0, ok=False),  # sent after the kill: beyond
        # Round 6: a's and b's first turns elsewhere, c's where it was.
        call("turn", "a", 6, 12.0, 13.0, replica="replica-2", prompt_tokens=200, cached_tokens=150),
        call("turn", "b", 6, 12.5, 13.5, replica="replica-3", prompt_tokens=200, cached_tokens=190),
        call("turn", "c", 6, 13.0, 14.0, replica="replica-2", prompt_tokens=200, cached_tokens=198),
        call("turn", "a", 7, 14.0, 15.0, replica="replica-2", prompt_tokens=300, cached_tokens=0),
    ]
    k = kill_summary(calls, t_kill, home, "replica-1", ["a", "b", "c"])
    assert (k["sessions"], k["sessions_moved"], k["requests"]) == (3, 2, 8)
    assert (k["in_flight"], k["in_flight_on_victim"]) == (2, 1)
    assert (k["failed_in_flight"], k["failed_beyond"]) == (1, 1)
    assert k["errors"] == ["RemoteProtocolError: cut"] * 2
    # Each moved session's first turn after the kill, not a later one (a's round 7).
    assert k["moved_measured"] == 2
    assert k["moved_landed_on"] == {"replica-2": 1, "replica-3": 1}
    assert k["moved_first_share"] == 340 / 400
    assert k["stayed_first_share"] == 198 / 200
