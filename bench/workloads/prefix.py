"""bench.compare's prefix-reuse scenarios and aggregate decode rows, the servers taking turns.

Every server is started (bench/lib/peers.py: 4 slots) and warmed up with one short request; then
each scenario in bench/lib/core.py, and each aggregate decode row, runs on one server after the
other (see `run`). A scenario that fails is recorded and the others go on, so one broken scenario
never costs a whole run.
"""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bench.lib import core, peers
from bench.lib.client import stream_chat
from bench.lib.core import Row
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, target
from bench.workloads import images


@dataclass(frozen=True)
class Plan:
    long: int  # paragraphs (~65 tokens each) of the ~1,000-token prompts
    system: int  # paragraphs of the ~1,200-token shared system prompt
    chat: int  # paragraphs of the 4-turn chat's document
    session: int  # paragraphs of each of the 8 sessions' documents
    sessions: int
    clients: int  # concurrent clients of the throughput scenario
    client_tokens: int  # tokens each client generates
    repeats: int  # runs of each scenario on the servers of REPEATED
    # Runs of each aggregate decode row there: one run lasts ~3 s and moves by 5-10% from run
    # to run on this machine (measured: two full benches at 3 runs put the 8-client row at
    # 0.98 both times, alternating A/B runs of the same code at 1.02).
    decode_repeats: int
    more_clients: tuple[int, ...] = ()  # further aggregate decode rows (a GPU run: 32 clients)

    @property
    def client_counts(self) -> tuple[int, ...]:
        """The aggregate decode rows: one client, then `clients` at once, then `more_clients`."""
        return (1, self.clients, *self.more_clients)


FULL = Plan(
    long=16,
    system=18,
    chat=6,
    session=4,
    sessions=8,
    clients=8,
    client_tokens=64,
    repeats=3,
    decode_repeats=7,
)
QUICK = Plan(
    long=4,
    system=5,
    chat=2,
    session=1,
    sessions=8,
    clients=8,
    client_tokens=16,
    repeats=1,
    decode_repeats=1,
)

Scenario = Callable[[str, core.Cold], list[Row]]

# The scenario whose target is "well under llama-server's" (it recomputes the shared prompt on
# every other slot), and how far under counts as well under.
AT_ONCE = "shared system, 4 users at once"
WELL_UNDER = 0.5
REPEATED = ("ours", "llama-server")  # the servers whose ratios are targets
PAUSE_S = 1.0  # after each server's turn: its idle work ends before the next server is timed


def scenarios(plan: Plan, with_images: bool) -> list[tuple[str, Scenario]]:
    out: list[tuple[str, Scenario]] = [
        ("same long prompt twice", lambda u, c: core.same_prompt_twice(u, c, plan.long)),
        ("growing prefix, rounds 1-3", lambda u, c: core.growing_prefix(u, c, plan.long)),
        ("4-turn chat, turns 2-4", lambda u, c: core.four_turn_chat(u, c, plan.chat)),
        (
            "shared system, 4 users in turn",
            lambda u, c: core.shared_system_in_turn(u, c, plan.system),
        ),
        (AT_ONCE, lambda u, c: core.four_users_at_once(u, True, c, plan.system)),
        (
            "4 users at once, nothing cached",
            lambda u, c: core.four_users_at_once(u, False, c, plan.system),
        ),
        (
            f"{plan.sessions} sessions x 3 turns, turns 2-3",
            lambda u, c: core.eight_sessions_three_turns(u, c, plan.session, plan.sessions),
        ),
    ]
    if with_images:
        out.append(("image re-ask, questions 2-3", lambda u, c: images.image_reask(u, c)))
    return out


def throughput_name(clients: int, tokens: int) -> str:
    return f"{clients} client{'s' if clients > 1 else ''} x {tokens} tokens"


def throughput_names(plan: Plan) -> list[str]:
    return [throughput_name(c, plan.client_tokens) for c in plan.client_counts]


def several_clients(names: list[str]) -> list[str]:
    """The aggregate decode rows that have a target: those of more than one client."""
    return [n for n in names if not n.startswith(throughput_name(1, 0).split(" x ")[0] + " x")]


def summarize(rows: list[Row]) -> dict:
    """One scenario's rows as one line: means over its warm requests and their cold references."""
    n = len(rows)
    warm = sum(w.ttft for _, w, _ in rows) / n
    cold = sum(c.ttft for _, _, c in rows) / n
    prompts = [w.prompt_tokens for _, w, _ in rows]
    cached = [w.cached_tokens for _, w, _ in rows]
    return {
        "warm_ttft": warm,
        "cold_ttft": cold,
        "ratio": warm / cold,
        "warm_total": sum(w.total for _, w, _ in rows) / n,
        "prompt_tokens": None if None in prompts else sum(prompts) / n,  # type: ignore[arg-type]
        "cached_tokens": None if None in cached else sum(cached) / n,  # type: ignore[arg-type]
    }


def _new_report(peer: peers.Peer) -> dict:
    return {
        "command": peer.command,
        "notes": peer.notes,
        "log": str(peer.log_path.relative_to(ROOT)),
        "scenarios": {},
        "rows": [],
        "throughput": {},
        "errors": {},
        # CPU seconds it used while the other servers were timed (it should be ~0: an idle
        # server that computes distorts the timed one's figures).
        "idle_cpu_s": 0.0,
    }


def run_scenario(peer: peers.Peer, out: dict, group: str, scenario: Scenario) -> list[Row]:
    """One run of a scenario on one server, into its report's rows (the caller summarizes them);
    a failure is recorded, never raised."""
    try:
        rows = scenario(peer.base_url, core.fresh_prefix)
    except Exception as e:  # one failing scenario must not lose the others
        out["errors"][group] = f"{type(e).__name__}: {e}"
        print(f"{peer.name:16} {group:44} FAILED: {e}", flush=True)
        traceback.print_exc()
        return []
    for name, warm, cold in rows:
        out["rows"].append(
            {"scenario": group, "name": name, "warm": warm.as_dict(), "cold": cold.as_dict()}
        )
        print(
            f"{peer.name:16} {name:44} {_tokens(warm.prompt_tokens):>6} "
            f"{_tokens(warm.cached_tokens):>6} {cold.ttft:8.3f} {warm.ttft:8.3f} "
            f"{warm.ttft / cold.ttft:9.3f}",
            flush=True,
        )
    return rows


def run_throughput(
    peer: peers.Peer, out: dict, clients: int, tokens: int, bias: dict
) -> dict | None:
    """One run of an aggregate decode row: {"tokens_per_s", "results"}; None if it failed (the
    failure is recorded in the report)."""
    key = throughput_name(clients, tokens)
    try:
        rate, results = core.decode_throughput(peer.base_url, clients, tokens, logit_bias=bias)
    except Exception as e:
        out["errors"][key] = f"{type(e).__name__}: {e}"
        print(f"{peer.name:16} {key}: FAILED: {e}", flush=True)
        return None
    print(f"{peer.name:16} aggregate decode, {key}: {rate:.1f} tok/s", flush=True)
    return {"tokens_per_s": rate, "results": [r.as_dict() for r in results]}


def _start(peer: peers.Peer, model: str) -> peers.Peer:
    try:
        peer.start()
    except Exception as e:
        if peer.name != "llama-server" or not peer.images:
            raise
        # The projector may not load in llama-server: run it without images.
        print(f"llama-server did not start with --mmproj ({e}); again without", flush=True)
        peer.stop()
        peer = peers.llama_server(model).start()
    stream_chat(peer.base_url, [{"role": "user", "content": "Hello"}], max_tokens=2)
    return peer


def _turns(
    started: list[peers.Peer], repeats: int, servers: dict[str, dict]
) -> Iterator[peers.Peer]:
    """The servers in turn, `repeats` rounds (only those of REPEATED after the first), with a
    pause after each turn so a server's idle work ends before the next one is timed. What the
    others computed meanwhile is added to their `idle_cpu_s` in `servers`."""
    for turn in range(repeats):
        for peer in started:
            if turn == 0 or peer.name in REPEATED:
                others = [p for p in started if p is not peer]
                before = [p.process.cpu_seconds() or 0.0 for p in others]
                yield peer
                for p, cpu in zip(others, before, strict=True):
                    servers[p.name]["idle_cpu_s"] += (p.process.cpu_seconds() or 0.0) - cpu
                time.sleep(PAUSE_S)


def run(
    chosen: list[peers.Peer], plan: Plan, bias: dict[str, float], model: str
) -> tuple[dict[str, dict], dict[str, str]]:
    """(servers, failed): every chosen server's rows by name, and why any did not run.

    Every server is up at once and each scenario runs on one server after the other: this
    machine's speed drifts by 10% and more over minutes (other tenants of the host), so running
    all of one server's scenarios before the next server's would compare different machines.
    A server between its turns computes nothing (its CPU time while the others are timed is in
    the report: `idle_cpu_s`); the pause after each turn lets a server's idle
    work (parking KV, prefilling the next turn's boundary) end before the next one is timed.

    Ours and llama-server run every scenario `plan.repeats` times (fresh documents each time)
    and every aggregate decode row `plan.decode_repeats` times, taking turns, and each figure is
    the mean over those runs: a warm request takes 5-100 ms and one request's figure moves by
    several ms from run to run here; an aggregate decode run lasts ~3 s and moves by 5-10%.
    llama-cpp-python (no target depends on it) runs each once."""
    failed: dict[str, str] = {}
    started: list[peers.Peer] = []
    try:
        for peer in chosen:
            print(f"\n== {peer.name}: starting ({' '.join(peer.command[:3])} ...)", flush=True)
            try:
                started.append(_start(peer, model))
            except Exception as e:
                peer.stop()
                failed[peer.name] = f"{type(e).__name__}: {e}"
                print(f"{peer.name} failed: {e} (log: {peer.log_path})", flush=True)
        servers = {peer.name: _new_report(peer) for peer in started}
        print(
            f"{'server':16} {'scenario':44} {'prompt':>6} {'cached':>6} {'cold s':>8} "
            f"{'warm s':>8} {'warm/cold':>9}",
            flush=True,
        )
        runs = {peer.name: dict(scenarios(plan, peer.images)) for peer in started}
        for group, scenario in scenarios(plan, with_images=True):
            rows: dict[str, list[Row]] = {peer.name: [] for peer in started}
            turns = _turns([p for p in started if group in runs[p.name]], plan.repeats, servers)
            for peer in turns:
                rows[peer.name] += run_scenario(peer, servers[peer.name], group, scenario)
            for name, done in rows.items():
                if done:
                    servers[name]["scenarios"][group] = summarize(done)
        for clients in plan.client_counts:
            rates: dict[str, list[dict]] = {peer.name: [] for peer in started}
            for peer in _turns(started, plan.decode_repeats, servers):
                out = servers[peer.name]
                rate = run_throughput(peer, out, clients, plan.client_tokens, bias)
                if rate is not None:
                    rates[peer.name].append(rate)
            key = throughput_name(clients, plan.client_tokens)
            for name, done in rates.items():
                if done:
                    servers[name]["throughput"][key] = {
                        "tokens_per_s": statistics.mean(r["tokens_per_s"] for r in done),
                        "results": [x for r in done for x in r["results"]],
                    }
    finally:
        for peer in started:
            peer.stop()
    return servers, failed


def targets(report: dict) -> list[Target]:
    """Warm TTFT of every scenario at most llama-server's (well under it where it recomputes),
    and aggregate decode at least llama-server's at every row of several clients."""
    servers = report["servers"]
    if "ours" not in servers or "llama-server" not in servers:
        return []
    ours, peer = servers["ours"], servers["llama-server"]
    rows = []
    for group in report["scenario_names"]:
        a, b = ours["scenarios"].get(group), peer["scenarios"].get(group)
        bound = WELL_UNDER if group == AT_ONCE else 1.0
        warm = _at(a, "warm_ttft"), _at(b, "warm_ttft")
        rows.append(target(f"warm TTFT: {group}", *warm, bound, at_most=True))
    for key in several_clients(report["throughput_names"]):
        a, b = ours["throughput"].get(key), peer["throughput"].get(key)
        rates = _at(a, "tokens_per_s"), _at(b, "tokens_per_s")
        rows.append(target(f"aggregate tok/s: {key}", *rates, 1.0, at_most=False))
    return rows


def _at(row: dict | None, key: str) -> float | None:
    return row[key] if row else None


def _tokens(n: float | None) -> str:
    return "n/a" if n is None else f"{n:.0f}"
