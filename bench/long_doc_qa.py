"""Long-document QA, as vLLM's and LMCache's benchmark runs it: ours against llama-server.

    python -m bench.long_doc_qa [--quick] [--servers ours,llama-server] [--runs N] [--out DIR]

N documents of about L tokens each (fresh random text, a unique tag first), each prompt one
document and a short question (chat, streamed, greedy, every reply the same length):
- round 1 (cold): every prompt once, in order, 4 requests in flight (the first 4 at once);
- round 2 (warm): the same prompts again in a random order, 4 in flight.
Each row: mean TTFT of the round per server and ours / llama-server. Both servers are up at
once and take turns, the order swapped from one run to the next (this machine's speed drifts
from minute to minute); each run has fresh documents, and each figure is the mean over the runs.
Targets: both rounds at most llama-server's mean TTFT. `python -m bench.compare` runs the same
`run()` (`--no-long-doc-qa` skips it).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from bench.lib import peers
from bench.lib.client import Result, stream_chat
from bench.lib.core import TOPICS, nonce
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, failed_lines, ratio_table, table_lines, target

RESULTS = ROOT / "bench" / "results"
COLD, WARM = "round 1 (cold)", "round 2 (warm)"
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


def prompts(plan: Plan, rnd: random.Random) -> list[list[dict]]:
    return [
        [{"role": "user", "content": f"{document(plan.words, rnd)}\n\n{QUESTION}"}]
        for _ in range(plan.documents)
    ]


def run_round(base: str, batch: list[list[dict]], plan: Plan, bias: dict) -> list[Result]:
    """Every prompt of `batch`, at most `plan.in_flight` at a time, in order."""

    def ask(messages: list[dict]) -> Result:
        return stream_chat(base, messages, max_tokens=plan.max_tokens, logit_bias=bias)

    with ThreadPoolExecutor(plan.in_flight) as pool:
        return list(pool.map(ask, batch))


def run_once(peer: peers.Peer, plan: Plan, bias: dict, seed: int) -> dict:
    """Both rounds on fresh documents: {round: [ttft, ...]} and the prompts' token counts."""
    rnd = random.Random(seed)
    batch = prompts(plan, rnd)
    cold = run_round(peer.base_url, batch, plan, bias)
    again = batch[:]
    rnd.shuffle(again)
    warm = run_round(peer.base_url, again, plan, bias)
    out = {
        COLD: [r.ttft for r in cold],
        WARM: [r.ttft for r in warm],
        "prompt_tokens": [r.prompt_tokens for r in cold],
        "warm_tokens": [(r.prompt_tokens, r.cached_tokens) for r in warm],
    }
    print(
        f"{peer.name:14} {COLD}: {statistics.fmean(out[COLD]) * 1000:7.1f} ms   "
        f"{WARM}: {statistics.fmean(out[WARM]) * 1000:7.1f} ms",
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
    with ExitStack() as stack:
        started = []
        for name in [n for n in NAMES if n in names]:
            try:
                peer = peers.make(name, model)
                stack.callback(peer.stop)
                peer.start()
                stream_chat(peer.base_url, [{"role": "user", "content": "Hello"}], max_tokens=2)
                started.append(peer)
            except (peers.PeerUnavailable, RuntimeError) as e:
                report["failed"][name] = f"{type(e).__name__}: {e}"
        samples: dict[str, list[dict]] = {p.name: [] for p in started}
        for i in range(n_runs):
            order = started if i % 2 == 0 else started[::-1]
            for peer in order:
                samples[peer.name].append(run_once(peer, plan, bias, seed=1000 * i + 1))
                time.sleep(PAUSE_S)
    for name, done in samples.items():
        report["servers"][name] = summarize(done)
    return report


def summarize(done: list[dict]) -> dict:
    tokens = [t for d in done for t in d["prompt_tokens"] if t is not None]
    warm = [(p, c) for d in done for p, c in d["warm_tokens"] if p and c is not None]
    return {
        COLD: statistics.fmean(statistics.fmean(d[COLD]) for d in done),
        WARM: statistics.fmean(statistics.fmean(d[WARM]) for d in done),
        "runs": {k: [statistics.fmean(d[k]) for d in done] for k in (COLD, WARM)},
        "prompt_tokens": statistics.fmean(tokens) if tokens else None,
        # Of round 2's prompt tokens, the share served from cache.
        "cached_share_warm": sum(c for _, c in warm) / sum(p for p, _ in warm) if warm else None,
    }


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
    return [target(name, ours, peer, 1.0, at_most=True) for name, ours, peer in values(report)]


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
    table = [(key, [s[key] for s in servers.values()], *_pair(report, key)) for key in (COLD, WARM)]
    lines += ratio_table(list(servers), table, first="round") + failed_lines(report)
    return "\n".join(lines) + "\n"


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
    table = markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "long-doc-qa-quick" if args.quick else "long-doc-qa"
    (args.out / f"{stem}.md").write_text(f"# Long-document QA\n\n{table}\n")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    print("\n" + table + "\n" + "\n".join(table_lines(targets(report))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
