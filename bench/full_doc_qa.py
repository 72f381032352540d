"""Full-document mode: against retrieval on the same questions, and against llama-server given the
same whole-collection prompts between other users' chats.

    python -m bench.full_doc_qa [--quick] [--servers ours,llama-server] [--model M] [--out DIR]

The workload (bench/workloads/full_doc_workload.py): a collection of about 3,400 tokens with facts
scattered across its chunks, and questions whose answers need 5 chunks. Every server runs
`-np 4 -c 16384 -t 2` (4,096 tokens a request on ours; llama-server `--kv-unified`), alone on
the machine: started, measured, stopped, then the next. Each server process's CPU time (user +
system) is read before and after its measured part.

1. Full against retrieval (ours): the collection is ingested into a full-mode collection and its
   prefix computed in the background; then each question is asked in full mode and by retrieval
   (top 4), which one first alternating. Rows: mean TTFT, cached share (cached / prompt tokens),
   answer quality (`found`: the share of the expected towns the answer names; `exact`: all of
   them), and full / retrieval.
2. Interleaved (ours, then llama-server): the questions come from several conversations in turn,
   and after each one `chats_between` unrelated chats (fresh text) run at once and take the
   slots. Ours answers through `/ask` in full mode (its prefix computed in the background after
   ingestion, as a deployment has it); llama-server gets the same prompt as a chat (the system
   prompt and the numbered chunks our server puts before the question, the question after
   them). Rows: mean TTFT over all questions and over the later ones (each conversation's first
   question apart), cached share, the prompts' mean tokens; ours / llama-server (target: mean
   TTFT at most 0.25x).

Results: bench/results/full-doc-qa.md (`--quick`: full-doc-qa-quick.md), and .json beside it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

import httpx
import psutil

from bench.doc_qa import SYSTEM, chunk_block
from bench.lib import peers
from bench.lib.client import Result, stream, stream_chat
from bench.lib.server_process import ROOT
from bench.lib.targets import table_lines, target
from bench.workloads.full_doc_workload import (
    FULL,
    QUICK,
    Plan,
    Question,
    score,
    unrelated_chat,
    workload,
)

RESULTS = ROOT / "bench" / "results"
AskOne = Callable[[str, Question], Result]  # (a server's base URL, a question) -> its reply
CTX_SIZE = 16384  # 4,096 a request with 4 slots: the collection and a question fit
TARGET = 0.25


def cpu_seconds(peer: peers.Peer) -> float:
    """User + system CPU time of the server's process so far."""
    times = psutil.Process(peer.process.proc.pid).cpu_times()
    return times.user + times.system


def load_embedder(base: str) -> None:
    """One small document in a collection of its own: the embedding model loads, so that the
    timed ingestion does not include that."""
    col = httpx.post(f"{base}/v1/collections", json={"name": "warm-up"}).json()["id"]
    body = {"filename": "warmup.txt", "text": "A first note to load the embedder."}
    doc = httpx.post(f"{base}/v1/collections/{col}/documents", json=body, timeout=120).json()
    while httpx.get(f"{base}/v1/documents/{doc['id']}", timeout=60).json()["status"] != "ready":
        time.sleep(0.1)


def full_collection(base: str, docs: list[tuple[str, str]]) -> tuple[str, dict]:
    """A full-mode collection of the documents, once ready and its prefix computed; its id and
    the seconds that took (the embedder loaded first, not timed)."""
    load_embedder(base)
    col = httpx.post(f"{base}/v1/collections", json={"name": "full", "mode": "full"}).json()["id"]
    t0 = time.perf_counter()
    for filename, text in docs:
        body = {"filename": filename, "text": text}
        r = httpx.post(f"{base}/v1/collections/{col}/documents", json=body, timeout=120)
        r.raise_for_status()
    while True:
        found = httpx.get(f"{base}/v1/collections/{col}", timeout=60).json()["full_prefix"]
        if found["state"] in ("cached", "too_long", "failed"):
            break
        time.sleep(0.1)
    if found["state"] != "cached":
        raise RuntimeError(f"the collection's prefix was not computed: {found}")
    return col, {"ready_and_cached_s": time.perf_counter() - t0, "prefix_tokens": found["tokens"]}


def ask(base: str, col: str, q: Question, plan: Plan, mode: str) -> Result:
    body = {"question": q.text, "mode": mode, "max_tokens": plan.max_tokens, "temperature": 0}
    return stream(f"{base}/v1/collections/{col}/ask", body)


def summary(results: list[Result], questions: list[Question] | None = None) -> dict:
    prompt = sum(r.prompt_tokens or 0 for r in results)
    cached = sum(r.cached_tokens or 0 for r in results)
    out = {
        "n": len(results),
        "mean_ttft": statistics.fmean(r.ttft for r in results),
        "cached_share": cached / prompt if prompt else None,
        "prompt_tokens": prompt / len(results),
    }
    if questions is not None:
        scores = [score(r.text, q.towns) for r, q in zip(results, questions, strict=True)]
        out["found"] = statistics.fmean(s for s, _ in scores)
        out["exact"] = statistics.fmean(float(e) for _, e in scores)
    return out


def full_vs_retrieval(model: str, plan: Plan) -> dict:
    """Part 1, on one server of ours."""
    work = workload(plan)
    with peers.make("ours", model) as peer:
        base = peer.base_url
        col, setup = full_collection(base, work.documents)
        cpu = cpu_seconds(peer)
        runs: dict[str, list[Result]] = {"full": [], "retrieval": []}
        for i, q in enumerate(work.questions):
            order = ("full", "retrieval") if i % 2 == 0 else ("retrieval", "full")
            for mode in order:
                runs[mode].append(ask(base, col, q, plan, mode))
        setup["cpu_s"] = cpu_seconds(peer) - cpu
    rows = {mode: summary(results, work.questions) for mode, results in runs.items()}
    rows["full"]["answers"] = [r.text for r in runs["full"]]
    rows["retrieval"]["answers"] = [r.text for r in runs["retrieval"]]
    return {"rows": rows, **setup}


def collection_messages(base: str, col: str) -> list[str]:
    """The chunk blocks our server puts before a full-mode question, in its order."""
    docs = httpx.get(f"{base}/v1/collections/{col}/documents", timeout=60).json()["data"]
    chunks = []
    for d in docs:
        chunks += httpx.get(f"{base}/v1/documents/{d['id']}/chunks", timeout=60).json()["data"]
    return [chunk_block(c["index"], c) for c in sorted(chunks, key=lambda c: c["index"])]


def interleaved(peer: peers.Peer, plan: Plan, ask_one: AskOne, seed: int) -> dict:
    """Part 2 on one server: each question (`ask_one(base url, question)`) timed, the
    unrelated chats between them not."""
    work, rnd = workload(plan), random.Random(seed)
    cpu = cpu_seconds(peer)
    results, first = [], []
    seen: set[int] = set()
    with ThreadPoolExecutor(plan.chats_between) as pool:
        for q in work.questions:
            results.append(ask_one(peer.base_url, q))
            first.append(q.conversation not in seen)
            seen.add(q.conversation)
            chats = [unrelated_chat(plan.chat_words, rnd) for _ in range(plan.chats_between)]
            list(pool.map(lambda m: stream_chat(peer.base_url, m, plan.chat_max_tokens), chats))
    out = summary(results)
    later = [r for r, f in zip(results, first, strict=True) if not f]
    out["mean_ttft_later"] = statistics.fmean(r.ttft for r in later) if later else None
    out["cpu_s"] = cpu_seconds(peer) - cpu
    return out


def run(model: str, quick: bool, servers: list[str]) -> dict:
    with peers.profiled(ctx_size=CTX_SIZE):
        return _run(model, quick, servers)


def _run(model: str, quick: bool, servers: list[str]) -> dict:
    plan = QUICK if quick else FULL
    report: dict = {"plan": asdict(plan), "failed": {}, "interleaved": {}}
    report["full_vs_retrieval"] = full_vs_retrieval(model, plan)
    work = workload(plan)
    with peers.make("ours", model) as peer:
        col, setup = full_collection(peer.base_url, work.documents)
        blocks = collection_messages(peer.base_url, col)
        row = interleaved(peer, plan, lambda base, q: ask(base, col, q, plan, "full"), 1)
        report["interleaved"]["ours"] = {**row, **setup}
    if "llama-server" in servers:
        sources = "Sources:\n\n" + "".join(blocks)

        def chat(base: str, q: Question) -> Result:
            user = f"{sources}Question: {q.text}"
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
            return stream_chat(base, messages, plan.max_tokens)

        try:
            with peers.make("llama-server", model) as peer:
                report["interleaved"]["llama-server"] = interleaved(peer, plan, chat, 1)
        except (peers.PeerUnavailable, RuntimeError, httpx.HTTPError) as e:
            report["failed"]["llama-server"] = f"{type(e).__name__}: {e}"
    return report


def markdown(report: dict) -> str:
    part = report["full_vs_retrieval"]
    rows = part["rows"]
    full, retr = rows["full"], rows["retrieval"]
    lines = [
        "## Full mode against retrieval (ours)",
        "",
        f"Collection: {part['prefix_tokens']} tokens, ready and computed in "
        f"{part['ready_and_cached_s']:.1f} s; questions' CPU time {part['cpu_s']:.1f} s.",
        "",
        "| mode | mean TTFT s | cached share | found | exact |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in (("full", full), ("retrieval (top 4)", retr)):
        lines.append(
            f"| {name} | {r['mean_ttft']:.3f} | {r['cached_share']:.2f} | {r['found']:.2f} "
            f"| {r['exact']:.2f} |"
        )
    lines.append(f"| full / retrieval | {full['mean_ttft'] / retr['mean_ttft']:.2f} | | | |")
    lines += ["", "## Full mode interleaved with other chats, ours against llama-server", ""]
    lines += [
        "| server | mean TTFT s | later questions s | cached share | prompt tokens | CPU s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    inter = report["interleaved"]
    for name, r in inter.items():
        later = "–" if r["mean_ttft_later"] is None else f"{r['mean_ttft_later']:.3f}"
        lines.append(
            f"| {name} | {r['mean_ttft']:.3f} | {later} | {r['cached_share']:.2f} | "
            f"{r['prompt_tokens']:.0f} | {r['cpu_s']:.1f} |"
        )
    ours, peer = inter.get("ours"), inter.get("llama-server")
    mean = target(
        "interleaved full-mode questions, mean TTFT",
        ours and ours["mean_ttft"],
        peer and peer["mean_ttft"],
        TARGET,
        at_most=True,
    )
    lines += ["", *table_lines([mean] if ours and peer else [])]
    lines += [f"\n{name} failed: {why}" for name, why in report["failed"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.full_doc_qa", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="a small collection: a smoke test")
    p.add_argument("--servers", default="ours,llama-server", help="ours, llama-server")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a GGUF path")
    args = p.parse_args(argv)
    from bench.blend_quality import MODELS

    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    model = MODELS[args.model]() if args.model in MODELS else args.model
    report = run(model, args.quick, servers)
    table = markdown(report)
    stem = "full-doc-qa-quick" if args.quick else "full-doc-qa"
    if args.model != "smollm2":
        stem += f"-{Path(args.model).stem}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.md").write_text(f"# Full-document mode\n\n{table}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
