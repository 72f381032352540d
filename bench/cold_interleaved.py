"""Cold prompts one at a time, ours and llama-server side by side, document by document.

    python -m bench.cold_interleaved [--quick] [--documents N] [--runs N] [--out DIR]

This machine's speed drifts by up to ~10% from one minute to the next, so two servers timed in
turns minutes apart (bench.similar_prompts, each started alone for its turn) differ by that much
whatever they do. Here both run at once with the same history, and the one not being timed is
frozen (SIGSTOP: none of its threads runs; the report gives its CPU time over the other's
requests): each document goes cold to one server, then to the other, the first alternating,
each followed by two repeats, so the drift falls on both alike.

A frozen server's clock runs on, so what it does when idle (ours: a conversation's next-turn
boundary, buffers for its next saves) comes due while it is frozen: each server gets `pause`
seconds once let go before its request is sent, as a client that waits that long between
requests. Both servers: `-np 4 -c 16384 -t 2`, the packaged model, after LMCache's warm-up round
(6 documents, 4 in flight); documents of `words` words as in bench.similar_prompts (LMCache's,
one word repeated, and random words).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bench.lib import peers
from bench.lib.client import stream_chat
from bench.lib.targets import Target, target, write_report
from bench.long_doc_qa import lmcache_document
from bench.similar_prompts import RESULTS, Plan, Turn, random_document

NAMES = ("ours", "llama-server")
KINDS = ("LMCache documents", "random words")
PARTS = ("cold", "repeat")


@dataclass(frozen=True, slots=True)
class Interleaved:
    words: int = 800
    documents: int = 8  # of each kind and run, each sent to both servers
    max_tokens: int = 16
    pause: float = 0.3  # seconds a server is let go before its request
    runs: int = 3


FULL = Interleaved()
QUICK = Interleaved(words=100, documents=2, max_tokens=4, runs=1)


class Side:
    """One server: frozen, but while one of its steps is timed."""

    def __init__(self, peer: peers.Peer, turn: Turn, pause: float) -> None:
        self.peer, self.turn, self.pause = peer, turn, pause
        self.cold: list[float] = []
        self.repeat: list[float] = []

    def one(self, document: str) -> None:
        self.peer.process.resume()
        try:
            time.sleep(self.pause)
            parts = self.turn.one_at_a_time([document])
        finally:
            self.peer.process.pause()
        self.cold.append(parts.cold)
        self.repeat.append(parts.repeat)


def documents(kind: str, plan: Interleaved, rnd: random.Random) -> list[str]:
    if kind == KINDS[0]:
        return [lmcache_document(200 + i, plan.words) for i in range(plan.documents)]
    return [random_document(plan.words, rnd) for _ in range(plan.documents)]


def measure(sides: dict[str, Side], plan: Interleaved, seed: int) -> dict:
    """Per kind: each server's cold and repeat TTFTs, and the frozen ones' CPU seconds."""
    rnd, idle_cpu = random.Random(seed), 0.0
    out: dict = {}
    for kind in KINDS:
        for side in sides.values():
            side.cold, side.repeat = [], []
        for i, doc in enumerate(documents(kind, plan, rnd)):
            order = list(sides) if i % 2 == 0 else list(sides)[::-1]
            for name in order:
                others = [s.peer.process for n, s in sides.items() if n != name]
                before = [p.cpu_seconds() or 0.0 for p in others]
                sides[name].one(doc)
                idle_cpu += sum(
                    (p.cpu_seconds() or 0.0) - b for p, b in zip(others, before, strict=True)
                )
        out[kind] = {n: {"cold": s.cold, "repeat": s.repeat} for n, s in sides.items()}
    return {"kinds": out, "idle_cpu_s": idle_cpu}


def run(model: str, plan: Interleaved, names: list[str]) -> dict:
    """`plan.runs` runs, each on servers started afresh (first one, then the other)."""
    runs = [
        one_run(model, plan, names if i % 2 == 0 else names[::-1], seed=11 + i)
        for i in range(plan.runs)
    ]
    kinds = {
        kind: {
            name: {part: [x for r in runs for x in r["kinds"][kind][name][part]] for part in PARTS}
            for name in names
        }
        for kind in KINDS
    }
    idle = sum(r["idle_cpu_s"] for r in runs)
    return {"plan": asdict(plan), "runs": runs, "kinds": kinds, "idle_cpu_s": idle}


def one_run(model: str, plan: Interleaved, names: list[str], seed: int) -> dict:
    bias = peers.eog_logit_bias(model)
    turn_plan = Plan(words=plan.words, max_tokens=plan.max_tokens)
    sides: dict[str, Side] = {}
    try:
        with peers.profiled(ctx_size=16384):
            for name in names:
                peer = peers.make(name, model).start()
                stream_chat(peer.base_url, [{"role": "user", "content": "Hello"}], max_tokens=2)
                peer.process.pause()
                sides[name] = Side(peer, Turn(peer, turn_plan, bias), plan.pause)
        warm_up = [lmcache_document(i, plan.words) for i in range(6)]
        for side in sides.values():  # the history: LMCache's warm-up round, each alone
            side.peer.process.resume()
            side.turn.at_once(warm_up)
            side.peer.process.pause()
        return measure(sides, plan, seed)
    finally:
        for side in sides.values():
            side.peer.stop()


def targets(report: dict) -> list[Target]:
    rows = []
    for kind, by_server in report["kinds"].items():
        if set(NAMES) <= set(by_server):
            ours, peer = (statistics.fmean(by_server[n]["cold"]) for n in NAMES)
            rows.append(target(f"cold TTFT, interleaved: {kind}", ours, peer, 1.0, at_most=True))
    return rows


def markdown(report: dict) -> str:
    plan = report["plan"]
    lines = [
        f"Cold prompts one at a time, interleaved: {plan['runs']} runs of {plan['documents']} "
        f"documents of {plan['words']} words of each kind, each to both servers (the other "
        f"frozen), `-np 4 -c 16384 -t 2`, {plan['pause']} s before each request (mean TTFT, s).",
        "",
        "| documents | ours cold | llama-server cold | ours / llama-server | per document: "
        "median (range) | ours repeat | llama-server repeat |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for kind, by in report["kinds"].items():
        if not set(NAMES) <= set(by):
            continue
        o, p = by["ours"], by["llama-server"]
        per_doc = [a / b for a, b in zip(o["cold"], p["cold"], strict=True)]
        cold_o, cold_p = statistics.fmean(o["cold"]), statistics.fmean(p["cold"])
        lines.append(
            f"| {kind} | {cold_o:.3f} | {cold_p:.3f} | {cold_o / cold_p:.2f} | "
            f"{statistics.median(per_doc):.2f} ({min(per_doc):.2f}-{max(per_doc):.2f}) | "
            f"{statistics.fmean(o['repeat']):.3f} | {statistics.fmean(p['repeat']):.3f} |"
        )
    lines += ["", "Each run's ratio, ours / llama-server (cold):", ""]
    for kind in KINDS:
        ratios = [_ratio(r["kinds"][kind]) for r in report.get("runs", [])]
        lines.append(f"- {kind}: " + ", ".join(f"{x:.2f}" for x in ratios if x is not None))
    lines += ["", f"CPU seconds of the frozen server over the other's requests: "
              f"{report['idle_cpu_s']:.2f}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _ratio(by_server: dict) -> float | None:
    if not set(NAMES) <= set(by_server):
        return None
    ours, peer = (statistics.fmean(by_server[n]["cold"]) for n in NAMES)
    return ours / peer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cold_interleaved", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="short documents, two of each kind")
    p.add_argument("--documents", type=int, default=None)
    p.add_argument("--runs", type=int, default=None)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    plan = QUICK if args.quick else FULL
    if args.documents:
        plan = replace(plan, documents=args.documents)
    if args.runs:
        plan = replace(plan, runs=args.runs)
    report = run(packaged_model_path(), plan, list(NAMES))
    stem = "cold-interleaved-quick" if args.quick else "cold-interleaved"
    write_report(
        args.out, stem, "Cold prompts, interleaved", markdown(report), report, targets(report)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
