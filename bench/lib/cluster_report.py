"""The cluster bench's targets and tables (bench/cluster.py), from its report alone:
bench.lib.report puts them into `python -m bench.compare`'s report, and tests build them from a
made-up report."""

from __future__ import annotations

from bench.lib.targets import Target, target

SHARE_TARGET = "cluster: cached share, nginx (consistent hash) / one server"
KILL_TARGET = "cluster: failed requests after a kill -9 beyond those in flight (count)"
LABELS = {
    "single": "one server",
    "hash": "3 replicas, nginx consistent hash",
    "round-robin": "3 replicas, nginx round-robin",
    "round-robin-private": "3 replicas, nginx round-robin, no shared tier",
}


def targets(report: dict) -> list[Target]:
    """Through nginx at least 0.95x the one server's cached share; after the kill -9, no
    failed request beyond those in flight (a count, not a ratio)."""
    setups = report.get("setups", {})
    single, hashed = setups.get("single"), setups.get("hash")
    if not single or not hashed:
        return []
    rows = [
        target(SHARE_TARGET, hashed["cached_share"], single["cached_share"], 0.95, at_most=False)
    ]
    if kill := hashed.get("kill"):
        n = kill["failed_beyond"]
        rows.append((KILL_TARGET, float(n), "= 0", "met" if n == 0 else "not met"))
    return rows


def markdown(report: dict) -> str:
    plan, setups = report["plan"], report["setups"]
    lines = [
        f"Replicas behind nginx: {plan['sessions']} sessions x {plan['turns']} turns (system "
        f"prompts of ~{65 * plan['system_paragraphs']} tokens, one per session) and "
        f"{plan['questions']} document question(s) per collection and round on "
        f"{plan['collections']} collection(s) of {plan['documents']} documents, replies of "
        f"{plan['max_tokens']} tokens, {plan['clients']} clients; the same requests against each "
        f"setup, each on a fresh PostgreSQL database. Every replica: "
        f"`{' '.join(report['replica_args'])}` with the shared KV tier (`--cache-dir`, "
        "`--cache-shared`); one server is one such replica, addressed directly. cached = "
        "cached / prompt tokens as the server reports them; warm = session turns 2 on.",
        "",
        "| setup | cached share | warm turns cached | questions cached | warm TTFT s | "
        "turn 1 TTFT s | question TTFT s | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, label in LABELS.items():
        s = setups.get(kind)
        if s is None:
            continue
        lines.append(
            f"| {label} | {_f(s['cached_share'])} | {_f(s['warm_turn_share'])} | "
            f"{_f(s['question_share'])} | {_f(s['warm_ttft'])} | {_f(s['first_turn_ttft'])} | "
            f"{_f(s['question_ttft'])} | {s['failed']} of {s['requests']} |"
        )
    lines += ["", *_tier_share_lines(setups)]
    hashed = setups.get("hash")
    if hashed:
        spread = ", ".join(f"{k} {v}" for k, v in sorted(hashed["sessions_per_replica"].items()))
        lines += ["", f"Sessions per replica (consistent hash): {spread}."]
    for name, ratio, bound, verdict in targets(report):
        if name == SHARE_TARGET:
            lines += ["", f"nginx / one server, cached share: {ratio:.2f} ({bound}: {verdict})"]
    if hashed and (kill := hashed.get("kill")):
        lines += ["", *_kill_lines(kill, plan)]
    lines += ["", *_cost_lines(setups)]
    return "\n".join(lines) + "\n"


def _tier_share_lines(setups: dict) -> list[str]:
    """Where the cached tokens of each setup's rounds came from (the replicas' logs)."""
    out = []
    for kind, label in LABELS.items():
        by_tier = (setups.get(kind) or {}).get("cached_by_tier")
        total = sum(by_tier.values()) if by_tier else 0
        if total:
            parts = sorted(by_tier.items(), key=lambda kv: -kv[1])
            out.append(f"{label} " + ", ".join(f"{t} {n / total:.0%}" for t, n in parts))
    return ["Cached tokens by the tier they came from: " + "; ".join(out) + "."] if out else []


def _kill_lines(kill: dict, plan: dict) -> list[str]:
    verdict = "met" if kill["failed_beyond"] == 0 else "not met"
    return [
        f"kill -9 of {kill['victim']} (holding {kill['sessions_moved']} of {kill['sessions']} "
        f"sessions) in round {plan['turns'] + 1} while one of its requests was in flight, then "
        f"{plan['kill_rounds'] - 1} more round(s): {kill['requests']} requests, "
        f"{kill['in_flight']} in flight at the kill ({kill['in_flight_on_victim']} of them on "
        f"{kill['victim']}), {kill['failed_in_flight']} of those failed; failed beyond them: "
        f"{kill['failed_beyond']} (= 0: {verdict}).",
        "",
        "| after the kill, first turn of | sessions | cached share | TTFT s |",
        "|---|---:|---:|---:|",
        f"| moved sessions (restored from the shared tier) | {kill['moved_measured']} | "
        f"{_f(kill['moved_first_share'])} | {_f(kill['moved_first_ttft'])} |",
        f"| sessions that stayed | {kill['sessions'] - kill['sessions_moved']} | "
        f"{_f(kill['stayed_first_share'])} | {_f(kill['stayed_first_ttft'])} |",
    ]


def _cost_lines(setups: dict) -> list[str]:
    out = []
    for kind, label in LABELS.items():
        s = setups.get(kind)
        if s is None or not s.get("memory"):
            continue
        rss = [m["rss_mib"] for m in s["memory"].values()]
        peak = max(m["peak_mib"] for m in s["memory"].values())
        out.append(
            f"- {label}: RSS per replica after the rounds {min(rss):.0f}-{max(rss):.0f} MiB "
            f"(peak {peak:.0f}); " + _db_line(s) + "; " + _tier_line(s["tier"])
        )
    return ["Costs, measured:", "", *out] if out else []


def _db_line(s: dict) -> str:
    db, n = s["db"], s["requests"]
    idle = s["db_idle_commits_per_replica_s"]
    net = db["xact_commit"] - idle * s["replicas"] * s["run_s"]
    return (
        f"PostgreSQL: {db['xact_commit']} commits in {s['run_s']:.0f} s for {n} requests "
        f"(~{net / n:.1f} per request beside the idle polls of {idle:.1f} commits/s per "
        f"replica), {db['tup_inserted']} rows inserted, {db['tup_updated']} updated, "
        f"{db['connections']} connections open"
    )


def _tier_line(t: dict) -> str:
    per_token = f"{t['bytes_per_token'] / 1024:.1f} KiB" if t["bytes_per_token"] else "–"
    return (
        f"shared tier: {t['files']} files, {t['bytes'] / 2**20:.0f} MiB ({per_token} per "
        f"token), journals {t['journal_added']} '+' / {t['journal_removed']} '-' lines "
        f"({t['journal_bytes']} bytes)"
    )


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"
