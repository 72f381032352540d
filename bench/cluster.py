"""Replicas behind nginx against one server: how much of the prompts the cache serves.

    python -m bench.cluster [--quick] [--out DIR]

One throwaway PostgreSQL, a fresh database per setup, the same workload for each
(bench/workloads/cluster_workload.py: sessions turn by turn, plus document questions on a few
collections) against (bench/workloads/cluster_setups.py):
1. one server (one replica, addressed directly);
2. 3 replicas behind nginx with deploy/nginx.conf (consistent hash on session/collection ids);
3. the same 3 replicas behind round-robin nginx (the hash dropped), for contrast;
4. round-robin again, without the shared tier: what a replica reuses of its own work alone.
Every replica runs `-np 2 -c 4096 -t 1` with the shared KV tier (`--cache-dir`, `--cache-shared`),
as `make cluster` starts them (but in 4). Per setup: the share of prompt tokens served from cache
(sum cached / sum prompt tokens) and the mean TTFT of warm turns (turn 2 on). Then, in the
consistent-hash setup, one more round during which the replica holding the most sessions is
killed (SIGKILL) while one of its requests is in flight, and a round after it: failed requests
beyond those in flight (target 0), and the moved sessions' cached share on their first turn
elsewhere (restored from the shared tier). Also measured: each replica's resident memory,
PostgreSQL's commits and rows during the rounds, and what the shared tier holds on disk.
Target: through nginx, at least 0.95x the one server's cached share. `python -m bench.compare`
runs the same `run()` after its other rows (`--no-cluster` skips it). Needs nginx
(scripts/nginx.sh) and PostgreSQL's server binaries (scripts/postgres.sh).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from app.cluster.cluster import Cluster
from bench.lib.cluster_report import markdown, targets
from bench.lib.server_process import ROOT
from bench.workloads.cluster_setups import (
    KINDS,
    REPLICA_ARGS,
    base_url,
    cache_sources,
    counter_delta,
    db_counters,
    new_database,
    postgres,
    rss_mib,
    started,
    tier_stats,
)
from bench.workloads.cluster_workload import FULL, QUICK, Call, Plan, Workload

RESULTS = ROOT / "bench" / "results"
KILL_AFTER_S = 0.05  # a request to the victim has been on its way this long: it is in flight
IDLE_S = 5.0  # how long PostgreSQL's idle load (the replicas' polls) is watched

__all__ = ["markdown", "run", "targets"]


def share(calls: list[Call]) -> float | None:
    prompt = sum(c.prompt_tokens for c in calls)
    return sum(c.cached_tokens for c in calls) / prompt if prompt else None


def mean_ttft(calls: list[Call]) -> float | None:
    ttfts = [c.ttft for c in calls if c.ttft is not None]
    return statistics.fmean(ttfts) if ttfts else None


def summary(calls: list[Call]) -> dict:
    turns = [c for c in calls if c.kind == "turn" and c.ok]
    warm = [c for c in turns if c.round >= 2]
    questions = [c for c in calls if c.kind == "question" and c.ok]
    ok = turns + questions
    return {
        "requests": len(calls),
        "failed": sum(not c.ok for c in calls),
        "prompt_tokens": sum(c.prompt_tokens for c in ok),
        "cached_tokens": sum(c.cached_tokens for c in ok),
        "cached_share": share(ok),
        "warm_turn_share": share(warm),
        "question_share": share(questions),
        "warm_ttft": mean_ttft(warm),
        "first_turn_ttft": mean_ttft([c for c in turns if c.round == 1]),
        "question_ttft": mean_ttft(questions),
    }


def compact(c: Call) -> list:
    """One request in the JSON report: kind, round, replica, ttft, prompt, cached, error."""
    ttft = round(c.ttft, 4) if c.ttft is not None else None
    return [c.kind, c.round, c.replica, ttft, c.prompt_tokens, c.cached_tokens, c.error]


def run(model: str, quick: bool) -> dict:
    plan = QUICK if quick else FULL
    report: dict = {"plan": asdict(plan), "replica_args": REPLICA_ARGS, "setups": {}}
    work = Path(tempfile.mkdtemp(prefix="kvchat-bench-cluster-"))
    try:
        with postgres(work) as server:
            for kind in KINDS:
                database = new_database(server, f"bench_{kind.replace('-', '_')}")
                print(f"cluster bench: {kind}", flush=True)
                report["setups"][kind] = run_setup(kind, plan, work, database, model)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def run_setup(kind: str, plan: Plan, work: Path, database: str, model: str) -> dict:
    t_start = time.monotonic()
    with started(kind, plan.replicas, work, database, model) as cluster:
        load = Workload(plan, base_url(kind, cluster))
        load.prepare([r.url for r in cluster.replicas])
        out: dict = {"replicas": len(cluster.replicas)}
        idle = db_counters(database)
        t_idle = time.monotonic()
        time.sleep(IDLE_S)
        before = db_counters(database, settle_s=0.0)
        idle_commits = before["xact_commit"] - idle["xact_commit"]
        out["db_idle_commits_per_replica_s"] = idle_commits / (
            (time.monotonic() - t_idle) * len(cluster.replicas)
        )
        t0 = time.monotonic()
        calls = [c for n in range(1, plan.turns + 1) for c in load.round(n)]
        out["run_s"] = time.monotonic() - t0
        after = db_counters(database)
        out["db"] = {**counter_delta(before, after), "connections": after["numbackends"]}
        out["cached_by_tier"] = cache_sources(cluster)
        out.update(summary(calls))
        out["calls"] = [compact(c) for c in calls]
        out["sessions_per_replica"] = dict(Counter(load.home[s] for s in load.sessions))
        out["memory"] = {r.name: rss_mib(r.proc.pid) for r in cluster.replicas if r.alive}
        out["tier"] = tier_stats(cluster.cache_dir, model)
        if kind == "hash":
            out["kill"] = kill_phase(cluster, load, plan)
    out["setup_s"] = time.monotonic() - t_start
    return out


def kill_phase(cluster: Cluster, load: Workload, plan: Plan) -> dict:
    """One round during which the replica holding the most sessions gets SIGKILL while a
    request of its own is in flight, then the rounds after it."""
    home = dict(load.home)
    victim_name = Counter(home[s] for s in load.sessions).most_common(1)[0][0]
    (victim,) = [r for r in cluster.replicas if r.name == victim_name]
    killed_at: list[float] = []
    done = threading.Event()

    def killer() -> None:
        while not done.is_set():
            now = time.monotonic()
            with load.lock:
                due = any(
                    home.get(c.key) == victim_name and now - c.t0 >= KILL_AFTER_S
                    for c in load.inflight.values()
                )
            if due:
                victim.proc.kill()
                killed_at.append(time.monotonic())
                return
            time.sleep(0.005)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    first = plan.turns + 1
    calls = load.round(first)
    done.set()
    thread.join()
    if not killed_at:  # none of its requests was ever in flight long enough: kill it now
        victim.proc.kill()
        killed_at.append(time.monotonic())
    victim.proc.wait()
    for n in range(first + 1, first + plan.kill_rounds):
        calls += load.round(n)
    return kill_summary(calls, killed_at[0], home, victim_name, load.sessions)


def kill_summary(
    calls: list[Call], t_kill: float, home: dict[str, str], victim: str, sessions: list[str]
) -> dict:
    """The kill -9 rounds' numbers. `home`: the replica of each session and collection before
    the kill. In flight = sent before the kill, ended after it; a failure of a request sent
    after the kill is one beyond them. A moved session's first turn after the kill is its first
    on another replica."""
    moved = {s for s in sessions if home[s] == victim}
    in_flight = [c for c in calls if c.t0 < t_kill < c.t1]
    failed = [c for c in calls if not c.ok]
    after = sorted((c for c in calls if c.ok and c.t0 >= t_kill), key=lambda c: c.t0)
    first_after: dict[str, Call] = {}
    for c in after:
        if c.kind == "turn":
            first_after.setdefault(c.key, c)
    moved_first = [c for s, c in first_after.items() if s in moved]
    stayed_first = [c for s, c in first_after.items() if s not in moved]
    return {
        "victim": victim,
        "sessions": len(sessions),
        "sessions_moved": len(moved),
        "requests": len(calls),
        "in_flight": len(in_flight),
        "in_flight_on_victim": sum(home.get(c.key) == victim for c in in_flight),
        "failed_in_flight": sum(c.t0 < t_kill < c.t1 for c in failed),
        "failed_beyond": sum(not c.t0 < t_kill < c.t1 for c in failed),
        "errors": [c.error for c in failed][:5],
        "moved_measured": len(moved_first),
        "moved_landed_on": dict(Counter(c.replica for c in moved_first)),
        "moved_first_share": share(moved_first),
        "stayed_first_share": share(stayed_first),
        "moved_first_ttft": mean_ttft(moved_first),
        "stayed_first_ttft": mean_ttft(stayed_first),
        "after_share": share(after),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cluster", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="6 sessions, 1 collection: a smoke test")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    report = run(packaged_model_path(), args.quick)
    report["quick"] = args.quick
    table = markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "cluster-quick" if args.quick else "cluster"
    (args.out / f"{stem}.md").write_text(f"# Replicas behind nginx\n\n{table}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
