"""Long-document QA, as vLLM's and LMCache's benchmark runs it: ours against llama-server.

    python -m bench.long_doc_qa [--quick] [--servers ours,llama-server] [--runs N] [--out DIR]

N documents of about L tokens each, each prompt one document (chat, streamed, greedy, every
reply the same length), of two kinds:
- random words: fresh random text, a unique tag first, and a short question;
- LMCache documents, as LMCache's long_doc_qa writes them: the document's number, then one word
  repeated (`"3" + "hi hi ..."`), so the prompts share all their text but the number.
Per kind:
- round 1 (cold): every prompt once, in order, 4 requests in flight (the first 4 at once);
- round 2 (warm): the same prompts again in a random order, 4 in flight.
Each row: mean TTFT of the round per server and ours / llama-server. Each server is started for
its turn and stopped after it, so it is timed alone on the machine (a server idle beside the
timed one changed the timed one's cold round by 8-10% here); the order swaps from one run to
the next, each run has fresh documents, and each figure is the mean over the runs. The report
gives each server's CPU seconds during its turns and names any other server process found
running. Targets: every round at most llama-server's mean TTFT. `python -m bench.compare` runs
the same `run()` (`--no-long-doc-qa` skips it).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from bench.lib import peers
from bench.lib.client import Result, stream_chat
from bench.lib.core import TOPICS, nonce
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, failed_lines, ratio_table, target, write_report

RESULTS = ROOT / "bench" / "results"
COLD, WARM = "round 1 (cold)", "round 2 (warm)"
LM_COLD, LM_WARM = f"{COLD}, LMCache documents", f"{WARM}, LMCache documents"
KINDS = {"random": (COLD, WARM), "lmcache": (LM_COLD, LM_WARM)}
ROUNDS = (COLD, WARM, LM_COLD, LM_WARM)
NAMES = ("ours", "llama-server")
# A server's idle work after a turn (parking KV, a next turn's boundary) ends before the other
# server is timed.
PAUSE_S = 1.0


@dataclass(frozen=True)
class Plan:
    documents: int = 8
    words: int = 700  # about 800 tokens with the question and the chat template
    in_flight: int = 4
    max_tokens: int = 16
    runs: int = 3


FULL = Plan()
QUICK = Plan(documents=4, words=120, max_tokens=4, runs=1)
QUESTION = "Question: which topics does the document mention most often? Answer in one sentence."


def document(words: int, rnd: random.Random) -> str:
    """Fresh text of `words` words, a unique tag first so no server holds any of it."""
    vocab = [*TOPICS, "the", "of", "and", "river", "council", "year", "north", "old", "new"]
    body = " ".join(rnd.choice(vocab) for _ in range(words))
    return f"Document {nonce()}.\n{body}"


def prompts(plan: Plan, rnd: random.Random, kind: str = "random") -> list[list[dict]]:
    if kind == "lmcache":
        # LMCache's own documents are numbered from 0 in every run; a server is fresh each turn.
        return [
            [{"role": "user", "content": lmcache_document(i, plan.words)}]
            for i in range(plan.documents)
        ]
    return [
        [{"role": "user", "content": f"{document(plan.words, rnd)}\n\n{QUESTION}"}]
        for _ in range(plan.documents)
    ]


def lmcache_document(i: int, words: int) -> str:
    """As LMCache's long_doc_qa writes a document: its number, then one word repeated."""
    return str(i) + " ".join(["hi"] * words)


def run_round(base: str, batch: list[list[dict]], plan: Plan, bias: dict) -> list[Result]:
    """Every prompt of `batch`, at most `plan.in_flight` at a time, in order."""

    def ask(messages: list[dict]) -> Result:
        return stream_chat(base, messages, max_tokens=plan.max_tokens, logit_bias=bias)

    with ThreadPoolExecutor(plan.in_flight) as pool:
        return list(pool.map(ask, batch))


def run_once(peer: peers.Peer, plan: Plan, bias: dict, seed: int, kind: str = "random") -> dict:
    """Both rounds on fresh documents: {round: [ttft, ...]} and the prompts' token counts."""
    cold_key, warm_key = KINDS[kind]
    rnd = random.Random(seed)
    batch = prompts(plan, rnd, kind)
    cold = run_round(peer.base_url, batch, plan, bias)
    again = batch[:]
    rnd.shuffle(again)
    warm = run_round(peer.base_url, again, plan, bias)
    out = {
        cold_key: [r.ttft for r in cold],
        warm_key: [r.ttft for r in warm],
        "prompt_tokens": [r.prompt_tokens for r in cold],
        "warm_tokens": [(r.prompt_tokens, r.cached_tokens) for r in warm],
    }
    print(
        f"{peer.name:14} {kind:8} cold: {statistics.fmean(out[cold_key]) * 1000:7.1f} ms   "
        f"warm: {statistics.fmean(out[warm_key]) * 1000:7.1f} ms",
        flush=True,
    )
    return out


def run(
    model: str, quick: bool, names: list[str], runs: int | None = None, documents: int = 0
) -> dict:
    plan = QUICK if quick else FULL
    if documents:
        plan = replace(plan, documents=documents)
    n_runs = runs or plan.runs
    bias = peers.eog_logit_bias(model)
    report: dict = {"plan": plan.__dict__ | {"runs": n_runs}, "servers": {}, "failed": {}}
    chosen = [n for n in NAMES if n in names]
    samples: dict[str, dict[str, list[dict]]] = {n: {k: [] for k in KINDS} for n in chosen}
    turns: dict[str, list[dict]] = {n: [] for n in chosen}
    for kind in KINDS:
        for i in range(n_runs):
            for name in chosen if i % 2 == 0 else chosen[::-1]:
                if name in report["failed"]:
                    continue
                try:
                    done, conditions = alone(name, model, plan, bias, 1000 * i + 1, kind)
                except (peers.PeerUnavailable, RuntimeError) as e:
                    report["failed"][name] = f"{type(e).__name__}: {e}"
                    continue
                samples[name][kind].append(done)
                turns[name].append(conditions)
    for name, kinds in samples.items():
        if all(kinds.values()):
            report["servers"][name] = summarize(kinds) | {"turns": turns[name]}
    return report


def alone(name: str, model: str, plan: Plan, bias: dict, seed: int, kind: str) -> tuple[dict, dict]:
    """One turn of `name`, started for it and stopped after it: (its rounds, the conditions:
    its CPU seconds during the rounds and the other servers found running)."""
    peer = peers.make(name, model)
    try:
        peer.start()
        stream_chat(peer.base_url, [{"role": "user", "content": "Hello"}], max_tokens=2)
        assert peer.process.proc is not None
        others = peers.other_servers(exclude={peer.process.proc.pid})
        cpu = peer.process.cpu_seconds() or 0.0
        done = run_once(peer, plan, bias, seed, kind)
        used = (peer.process.cpu_seconds() or 0.0) - cpu
    finally:
        peer.stop()
    time.sleep(PAUSE_S)
    return done, {"kind": kind, "cpu_s": round(used, 2), "other_servers": others}


def summarize(kinds: dict[str, list[dict]]) -> dict:
    """Per round: the mean over the runs, and each run's mean; prompt size and cached share of
    the random-word documents' warm round."""
    out: dict = {"runs": {}}
    for kind, done in kinds.items():
        for key in KINDS[kind]:
            per_run = [statistics.fmean(d[key]) for d in done]
            out[key], out["runs"][key] = statistics.fmean(per_run), per_run
    done = kinds["random"]
    tokens = [t for d in done for t in d["prompt_tokens"] if t is not None]
    warm = [(p, c) for d in done for p, c in d["warm_tokens"] if p and c is not None]
    out["prompt_tokens"] = statistics.fmean(tokens) if tokens else None
    # Of round 2's prompt tokens, the share served from cache.
    out["cached_share_warm"] = sum(c for _, c in warm) / sum(p for p, _ in warm) if warm else None
    return out


def _pair(report: dict, key: str) -> tuple[float | None, float | None]:
    servers = report["servers"]
    return (
        servers.get("ours", {}).get(key),
        servers.get("llama-server", {}).get(key),
    )


def targets(report: dict) -> list[Target]:
    """Mean TTFT of both rounds at most llama-server's."""
    if not {"ours", "llama-server"} <= set(report["servers"]):
        return []
    rows = [(f"long-document QA, mean TTFT: {key}", *_pair(report, key)) for key in ROUNDS]
    return [target(name, ours, peer, 1.0, at_most=True) for name, ours, peer in rows]


def values(report: dict) -> list[tuple[str, float | None, float | None]]:
    """(target name, ours, llama-server) per round: the README's headline rows."""
    return [(f"long-document QA, mean TTFT: {key}", *_pair(report, key)) for key in (COLD, WARM)]


def markdown(report: dict) -> str:
    plan = report["plan"]
    servers = report["servers"]
    tokens = next((s["prompt_tokens"] for s in servers.values() if s["prompt_tokens"]), None)
    size = f"~{tokens:.0f}" if tokens else "?"
    lines = [
        f"Long-document QA (vLLM's and LMCache's benchmark): {plan['documents']} documents, "
        f"{size}-token prompts, {plan['in_flight']} in flight, {plan['max_tokens']} tokens a "
        f"reply; round 1 cold, round 2 the same prompts in a random order; mean TTFT (s) over "
        f"{plan['runs']} runs.",
        "",
    ]
    table = [(key, [s[key] for s in servers.values()], *_pair(report, key)) for key in ROUNDS]
    lines += ratio_table(list(servers), table, first="round") + failed_lines(report)
    lines += ["", *conditions(report)]
    return "\n".join(lines) + "\n"


def conditions(report: dict) -> list[str]:
    """How the servers ran: each alone, its CPU seconds per turn, anything else running."""
    lines = ["Each server ran alone (started for its turn, stopped after it)."]
    for name, server in report["servers"].items():
        turns = server.get("turns", [])
        cpu = ", ".join(f"{t['cpu_s']:.0f}" for t in turns)
        others = sorted({o for t in turns for o in t["other_servers"]})
        lines.append(
            f"- {name}: CPU seconds per turn: {cpu}; other servers: {'; '.join(others) or 'none'}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.long_doc_qa", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="small prompts, one run (smoke test)")
    p.add_argument("--servers", default=",".join(NAMES))
    p.add_argument("--runs", type=int, default=None, help=f"runs (default {FULL.runs})")
    p.add_argument("--documents", type=int, default=0, help=f"(default {FULL.documents})")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    names = [s.strip() for s in args.servers.split(",") if s.strip()]
    report = run(packaged_model_path(), args.quick, names, args.runs, args.documents)
    stem = "long-doc-qa-quick" if args.quick else "long-doc-qa"
    table = markdown(report) + "\n"
    write_report(args.out, stem, "Long-document QA", table, report, targets(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
