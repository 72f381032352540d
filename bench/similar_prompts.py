"""Prompts that look alike: ours against llama-server, each server alone on the machine.

    python -m bench.similar_prompts [--quick] [--runs N] [--servers ours,llama-server] [--out DIR]

Two kinds of documents of about 800 words, each sent as one chat message (streamed, greedy, 16
tokens a reply, end-of-generation biased away so every reply is as long):
- LMCache's long-document QA: the document's id, then one word repeated (`str(i) + "hi hi ..."`),
  so every document shares all of its text but the id with the others;
- random words: fresh text of the same length, nothing shared.
Rows, each the mean TTFT (s) of its requests:
- the warm-up round of LMCache's benchmark: 6 documents, 4 in flight (`-c 16384`, then again on a
  server started with `-c 8192`); then its query round: the same documents in a random order;
- the same kind of documents one at a time: each cold, then each repeated twice;
- random words, 4 in flight (cold), and one at a time (cold, then repeated).
Every server runs with `-np 4 -t 2` and is started for its turn and stopped after it, so no other
server is up while it is timed (a server that waits idle beside the timed one changed the timed
one's figures by 8-10% here); each run starts them in the other order, and each figure is the
mean over the runs. The report names any other server process found running (their CPU time
would distort every figure), and each server's CPU time during its turn.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.lib import peers
from bench.lib.client import Result, stream_chat
from bench.lib.core import TOPICS, nonce
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, ratio_table, target, write_report
from bench.long_doc_qa import lmcache_document

RESULTS = ROOT / "bench" / "results"
NAMES = ("ours", "llama-server")
ROWS = (
    "LMCache documents, warm-up round, 4 in flight",
    "LMCache documents, warm-up round, 4 in flight, -c 8192",
    "LMCache documents, query round, 4 in flight",
    "LMCache documents, one at a time: cold",
    "LMCache documents, one at a time: repeat",
    "random words, 4 in flight: cold",
    "random words, one at a time: cold",
    "random words, one at a time: repeat",
)
WARM_UP, WARM_UP_8K, QUERY, LM_COLD, LM_REPEAT, RND_AT_ONCE, RND_COLD, RND_REPEAT = ROWS


@dataclass(frozen=True)
class Plan:
    words: int = 800
    documents: int = 6  # LMCache's warm-up round
    # Documents sent one at a time, each then repeated twice: as many as the warm-up round's (one
    # cold prompt's TTFT moves by up to ~10% from one request to the next here; three runs of
    # three read 0.93-1.10 for two servers within 1% of each other, interleaved).
    one_at_a_time: int = 6
    in_flight: int = 4
    max_tokens: int = 16
    runs: int = 3
    ctx: tuple[int, int] = (16384, 8192)


FULL = Plan()
QUICK = Plan(words=100, documents=4, one_at_a_time=1, max_tokens=4, runs=1)


def random_document(words: int, rnd: random.Random) -> str:
    vocab = [*TOPICS, "the", "of", "and", "river", "council", "year", "north", "old", "new"]
    return f"{nonce()} " + " ".join(rnd.choice(vocab) for _ in range(words))


@dataclass(frozen=True, slots=True)
class OneAtATime:
    """Mean TTFTs of documents sent one at a time, and where a cold one's time went: around the
    prompt's compute (TTFT less the server's own `timings.prompt_ms`: HTTP, template, tokens,
    cache lookups and saves, the first token's way out) and the compute per prompt token."""

    cold: float
    repeat: float
    around_s: float | None  # None: the server reported no timings
    ms_per_token: float | None

    @classmethod
    def of(cls, cold: list[Result], repeat: list[Result]) -> OneAtATime:
        timed = [r for r in cold if r.timings.get("prompt_n")]
        around = [r.ttft - r.timings["prompt_ms"] / 1000 for r in timed]
        per_token = [r.timings["prompt_ms"] / r.timings["prompt_n"] for r in timed]
        return cls(
            statistics.fmean(r.ttft for r in cold),
            statistics.fmean(r.ttft for r in repeat),
            statistics.fmean(around) if around else None,
            statistics.fmean(per_token) if per_token else None,
        )


class Turn:
    """One server's turn: requests to it, `plan`'s length and bias."""

    def __init__(self, peer: peers.Peer, plan: Plan, bias: dict) -> None:
        self.peer, self.plan, self.bias = peer, plan, bias
        self.cold_parts: dict[str, OneAtATime] = {}  # by row, once measured

    def ask(self, text: str) -> Result:
        messages = [{"role": "user", "content": text}]
        return stream_chat(
            self.peer.base_url, messages, max_tokens=self.plan.max_tokens, logit_bias=self.bias
        )

    def at_once(self, documents: list[str]) -> float:
        with ThreadPoolExecutor(self.plan.in_flight) as pool:
            return statistics.fmean(r.ttft for r in pool.map(self.ask, documents))

    def one_at_a_time(self, documents: list[str]) -> OneAtATime:
        """Each document cold, then repeated twice right after."""
        cold: list[Result] = []
        repeat: list[Result] = []
        for text in documents:
            cold.append(self.ask(text))
            repeat += [self.ask(text) for _ in range(2)]
        return OneAtATime.of(cold, repeat)


def measure_16k(turn: Turn, rnd: random.Random) -> dict[str, float]:
    plan = turn.plan
    lm = [lmcache_document(i, plan.words) for i in range(plan.documents)]
    out = {WARM_UP: turn.at_once(lm)}
    out[QUERY] = turn.at_once(rnd.sample(lm, len(lm)))
    singles = [lmcache_document(100 + i, plan.words) for i in range(plan.one_at_a_time)]
    lm_singles = turn.one_at_a_time(singles)
    out[LM_COLD], out[LM_REPEAT] = lm_singles.cold, lm_singles.repeat
    out[RND_AT_ONCE] = turn.at_once([random_document(plan.words, rnd) for _ in lm])
    singles = [random_document(plan.words, rnd) for _ in range(plan.one_at_a_time)]
    rnd_singles = turn.one_at_a_time(singles)
    out[RND_COLD], out[RND_REPEAT] = rnd_singles.cold, rnd_singles.repeat
    turn.cold_parts = {LM_COLD: lm_singles, RND_COLD: rnd_singles}
    return out


def measure_8k(turn: Turn, rnd: random.Random) -> dict[str, float]:
    lm = [lmcache_document(i, turn.plan.words) for i in range(turn.plan.documents)]
    return {WARM_UP_8K: turn.at_once(lm)}


def one_turn(name: str, model: str, plan: Plan, bias: dict, ctx: int, seed: int) -> dict:
    """Start `name` alone with `ctx` cells, time its rows, stop it."""
    with peers.profiled(ctx_size=ctx):
        peer = peers.make(name, model)
    try:
        peer.start()
        stream_chat(peer.base_url, [{"role": "user", "content": "Hello"}], max_tokens=2)
        neighbours = peers.other_servers(exclude={peer.process.proc.pid})
        cpu = peer.process.cpu_seconds()
        turn = Turn(peer, plan, bias)
        measure = measure_16k if ctx == plan.ctx[0] else measure_8k
        rows = measure(turn, random.Random(seed))
        used = (peer.process.cpu_seconds() or 0.0) - (cpu or 0.0)
        parts = {row: asdict(p) for row, p in turn.cold_parts.items()}
        return {"rows": rows, "cpu_s": used, "neighbours": neighbours, "cold_parts": parts}
    finally:
        peer.stop()
        time.sleep(1.0)  # its memory returned before the next server starts


def run(model: str, plan: Plan, names: list[str]) -> dict:
    bias = peers.eog_logit_bias(model)
    report: dict = {"plan": plan.__dict__, "servers": {n: [] for n in names}, "failed": {}}
    for i in range(plan.runs):
        order = names if i % 2 == 0 else names[::-1]
        for ctx in plan.ctx:
            for name in order:
                if name in report["failed"]:
                    continue
                try:
                    turn = one_turn(name, model, plan, bias, ctx, seed=1000 * i + 7)
                except (peers.PeerUnavailable, RuntimeError) as e:
                    report["failed"][name] = f"{type(e).__name__}: {e}"
                    continue
                report["servers"][name].append(turn | {"run": i, "ctx": ctx})
                print(f"run {i + 1} {name} -c {ctx}: {json.dumps(turn['rows'])}", flush=True)
    report["means"] = {n: means(turns) for n, turns in report["servers"].items() if turns}
    return report


def means(turns: list[dict]) -> dict[str, dict]:
    """Per row: the mean over the runs and each run's figure."""
    out: dict[str, dict] = {}
    for row in ROWS:
        values = [t["rows"][row] for t in turns if row in t["rows"]]
        if values:
            out[row] = {"mean": statistics.fmean(values), "runs": values}
    return out


def targets(report: dict) -> list[Target]:
    """Every row at most llama-server's mean TTFT."""
    m = report.get("means", {})
    if not {"ours", "llama-server"} <= set(m):
        return []
    ours, peer = m["ours"], m["llama-server"]
    rows = [r for r in ROWS if r in ours and r in peer]
    return [
        target(f"mean TTFT: {r}", ours[r]["mean"], peer[r]["mean"], 1.0, at_most=True) for r in rows
    ]


def markdown(report: dict) -> str:
    plan, m = report["plan"], report.get("means", {})
    names = list(m)
    lines = [
        f"Prompts that look alike: documents of {plan['words']} words, `-np 4 -t 2`, each server "
        f"alone on the machine, {plan['runs']} runs (mean TTFT, s; each run's ratio after the "
        "mean's).",
        "",
    ]
    table = []
    for row in ROWS:
        if not all(row in m[n] for n in names):
            continue
        ours, peer = (m.get(n, {}).get(row, {}).get("mean") for n in NAMES)
        table.append((row, [m[n][row]["mean"] for n in names], ours, peer))
    lines += ratio_table(names, table, first="row")
    if {"ours", "llama-server"} <= set(m):
        lines += ["", "Each run's ratio, ours / llama-server:", ""]
        for row in [r for r in ROWS if r in m["ours"] and r in m["llama-server"]]:
            runs = zip(m["ours"][row]["runs"], m["llama-server"][row]["runs"], strict=False)
            lines.append(f"- {row}: " + ", ".join(f"{a / b:.2f}" for a, b in runs))
    lines += [*_cold_parts(report), "", *_conditions(report)]
    return "\n".join(lines) + "\n"


def _cold_parts(report: dict) -> list[str]:
    """Where a cold prompt's time went, one at a time, per server (means over the runs)."""
    out = []
    for row in (LM_COLD, RND_COLD):
        cells = []
        for name, turns in report["servers"].items():
            parts = [t["cold_parts"][row] for t in turns if row in t.get("cold_parts", {})]
            around = [p["around_s"] for p in parts if p["around_s"] is not None]
            per_token = [p["ms_per_token"] for p in parts if p["ms_per_token"] is not None]
            if around and per_token:
                cells.append(
                    f"{name} {1000 * statistics.fmean(around):.0f} ms around, "
                    f"{statistics.fmean(per_token):.2f} ms a prompt token"
                )
        if cells:
            out.append(f"- {row}: " + "; ".join(cells))
    if out:
        out = [
            "",
            "Where a cold prompt's time went (TTFT less the server's own `prompt_ms`: HTTP, "
            "template, tokens, cache lookups and saves, the first token's way out; then the "
            "compute per prompt token):",
            "",
            *out,
        ]
    return out


def _conditions(report: dict) -> list[str]:
    out = []
    for name, turns in report["servers"].items():
        cpu = ", ".join(f"{t['cpu_s']:.0f}" for t in turns)
        out.append(f"- {name}: CPU seconds of its turns: {cpu}")
        seen = sorted({n for t in turns for n in t["neighbours"]})
        out.append("  other servers running: " + ("; ".join(seen) if seen else "none"))
    out += [f"- {name} failed: {why}" for name, why in report["failed"].items()]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.similar_prompts", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="short documents, one run (smoke test)")
    p.add_argument("--servers", default=",".join(NAMES))
    p.add_argument("--runs", type=int, default=None, help=f"runs (default {FULL.runs})")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    plan = QUICK if args.quick else FULL
    if args.runs:
        plan = Plan(**(plan.__dict__ | {"runs": args.runs}))
    names = [s.strip() for s in args.servers.split(",") if s.strip()]
    report = run(packaged_model_path(), plan, names)
    stem = "similar-prompts-quick" if args.quick else "similar-prompts"
    write_report(
        args.out, stem, "Prompts that look alike", markdown(report), report, targets(report)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
