"""bench.lib.cluster_report: the cluster bench's targets and tables from a made-up report (no
servers), and bench.lib.report carrying them into `python -m bench.compare`'s report."""

from __future__ import annotations

from dataclasses import asdict

from bench.lib import report
from bench.lib.cluster_report import KILL_TARGET, SHARE_TARGET, markdown, targets
from bench.workloads.cluster_setups import REPLICA_ARGS
from bench.workloads.cluster_workload import QUICK
from tests.bench.lib.test_report import full_report


def setup(share: float, replicas: int = 3, failed: int = 0) -> dict:
    names = [f"replica-{i}" for i in range(1, replicas + 1)]
    return {
        "replicas": replicas,
        "requests": 21,
        "failed": failed,
        "prompt_tokens": 1000,
        "cached_tokens": round(1000 * share),
        "cached_share": share,
        "warm_turn_share": 0.9,
        "question_share": 0.8,
        "warm_ttft": 0.25,
        "first_turn_ttft": 1.5,
        "question_ttft": 0.5,
        "run_s": 20.0,
        "db_idle_commits_per_replica_s": 3.0,
        "db": {"xact_commit": 300, "tup_inserted": 36, "tup_updated": 36, "connections": 10},
        "cached_by_tier": {"own_slot": 600, "disk": 200},
        "sessions_per_replica": dict.fromkeys(names, 2),
        "memory": {n: {"rss_mib": 900.0, "peak_mib": 950.0} for n in names},
        "tier": {
            "files": 10,
            "bytes": 50 << 20,
            "tokens": 2300,
            "bytes_per_token": 23040.0,
            "journal_added": 26,
            "journal_removed": 16,
            "journal_bytes": 1800,
        },
    }


def kill(failed_beyond: int) -> dict:
    return {
        "victim": "replica-1",
        "sessions": 6,
        "sessions_moved": 4,
        "requests": 14,
        "in_flight": 2,
        "in_flight_on_victim": 2,
        "failed_in_flight": 1,
        "failed_beyond": failed_beyond,
        "errors": [],
        "moved_measured": 4,
        "moved_landed_on": {"replica-2": 4},
        "moved_first_share": 0.93,
        "stayed_first_share": 0.95,
        "moved_first_ttft": 0.4,
        "stayed_first_ttft": 0.2,
        "after_share": 0.9,
    }


def cluster_report(hash_share: float, failed_beyond: int = 0) -> dict:
    hashed = {**setup(hash_share), "kill": kill(failed_beyond)}
    return {
        "plan": asdict(QUICK),
        "replica_args": REPLICA_ARGS,
        "setups": {
            "single": setup(0.70, replicas=1),
            "hash": hashed,
            "round-robin": setup(0.69),
            "round-robin-private": setup(0.30),
        },
    }


def test_through_nginx_the_cached_share_must_reach_095_of_the_one_servers():
    (share, failures) = targets(cluster_report(0.68))
    assert share[0] == SHARE_TARGET and share[2:] == ("≥ 0.95", "met")
    assert abs(share[1] - 0.68 / 0.70) < 1e-9
    assert targets(cluster_report(0.60))[0][3] == "not met"
    assert failures == (KILL_TARGET, 0.0, "= 0", "met")


def test_a_failed_request_beyond_those_in_flight_misses_the_kill_target():
    assert targets(cluster_report(0.7, failed_beyond=1))[1] == (KILL_TARGET, 1.0, "= 0", "not met")


def test_no_targets_without_both_the_one_server_and_the_hash_setup():
    partial = cluster_report(0.7)
    del partial["setups"]["single"]
    assert targets(partial) == []


def test_the_tables_name_every_setup_the_kill_and_the_costs():
    md = markdown(cluster_report(0.68))
    assert "| one server | 0.700 | 0.900 | 0.800 | 0.250 | 1.500 | 0.500 | 0 of 21 |" in md
    for label in ("nginx consistent hash", "nginx round-robin |", "no shared tier"):
        assert label in md
    assert "nginx / one server, cached share: 0.97 (≥ 0.95: met)" in md
    assert "kill -9 of replica-1 (holding 4 of 6 sessions)" in md
    assert "failed beyond them: 0 (= 0: met)" in md
    assert "| moved sessions (restored from the shared tier) | 4 | 0.930 | 0.400 |" in md
    assert "own_slot 75%, disk 25%" in md
    assert "RSS per replica after the rounds 900-900 MiB (peak 950)" in md
    assert "(22.5 KiB per token)" in md
    # 300 commits, less 3 commits/s per replica for 20 s on 3 replicas, over 21 requests.
    assert "~5.7 per request" in md


def test_the_compare_report_carries_the_cluster_rows_and_targets():
    whole = {**full_report(), "cluster": cluster_report(0.68)}
    names = [name for name, *_ in report.targets(whole)]
    assert names[-2:] == [SHARE_TARGET, KILL_TARGET]
    md = report.markdown(whole)
    assert md.index("Replicas behind nginx") < md.index("Targets")
    assert f"| {SHARE_TARGET} | 0.97 | ≥ 0.95 | met |" in md
    assert SHARE_TARGET not in report.markdown(full_report())
