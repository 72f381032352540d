"""Speculative decoding, side by side: ours against llama-server with `--spec-type ngram-simple`.

    python -m bench.speculation [--quick] [--out DIR]

Servers, one at a time, each round in the other order (a drift of the machine lands on all):
- ours: `--spec-type ngram-docs`;
- ours, no speculation: default flags (`--spec-type none`);
- llama-server: `--spec-type ngram-simple` (its defaults: 12-token n-gram, 48-token draft).
All with the bench's flags (-np 4 -c 8192 -t 2), greedy, `ignore_eos` so every reply has the
same length. Rows (decode speed = (reply tokens - 1) / (end - first token)):
- quoting: a document in the prompt, asked to quote it;
- document answers: the doc-QA workload's documents in the prompt (as llama-server is fed
  them), its questions;
- document answers, as each server is used: the doc-QA workload's documents in a collection of
  ours, its questions through `/ask` (retrieval, our layout, the replies earlier questions on the
  same documents got as a draft source), and llama-server fed the same retrieved chunks in
  score order through chat (bench.doc_qa's prompt);
- free text: a story, nothing to copy;
- 4 busy slots: four quoting requests at once, aggregate tokens per second over the wall time.
Targets: quoting and document answers (as each server is used) >= 1.1x llama-server with
speculation; free text >= 0.97x ours without speculation; 4 slots not below ours without it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench import doc_qa, doc_qa_workload, peers
from bench.client import Result, stream, stream_chat
from bench.core import long_document
from bench.server_process import ROOT
from bench.targets import Target, table_lines, target

RESULTS = ROOT / "bench" / "results"
REPLY = 128
SERVERS = ("ours", "ours-no-spec", "llama-server-spec")


def make(name: str, model: str) -> peers.Peer:
    if name == "ours":
        return peers.ours(model, extra=("--spec-type", "ngram-docs"))
    if name == "ours-no-spec":
        peer = peers.ours(model)
        peer.name = name
        return peer
    peer = peers.llama_server(model)
    peer.process.command += ["--spec-type", "ngram-simple"]
    peer.name = name
    return peer


def quoting_messages(seed: int) -> list[dict]:
    text = long_document(3, seed=f"quote-{seed}")
    return [{"role": "user", "content": f"{text}\n\nQuote the text above exactly, word for word."}]


def document_messages(rnd: random.Random, docs: list[tuple[str, str, str]], question: str):
    topic = next(t for t in (d[1] for d in docs) if t in question)
    chosen = [d for d in docs if d[1] == topic][:3]
    sources = "\n\n".join(f"[{i + 1}] {name}\n{text}" for i, (name, _, text) in enumerate(chosen))
    return [{"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"}]


def story_messages(seed: int) -> list[dict]:
    animals = ["dragon", "otter", "heron", "fox", "lynx", "whale"]
    return [{"role": "user", "content": f"Write a short story about a {animals[seed % 6]}."}]


def ask(base: str, messages: list[dict]) -> Result:
    return stream_chat(base, messages, max_tokens=REPLY, ignore_eos=True)


def speed(r: Result) -> float:
    return (r.completion_tokens - 1) / max(r.total - r.ttft, 1e-9)


ASKED = "document answers, as used"


def ask_workload(quick: bool) -> tuple[list[tuple[str, str, str]], list[str]]:
    """The doc-QA corpus and its Zipf-popular questions (popular topics come back)."""
    rnd = random.Random(26)
    plan = doc_qa_workload.QUICK if quick else doc_qa_workload.FULL
    n = 4 if quick else 16
    return doc_qa_workload.corpus(plan, rnd), doc_qa_workload.questions(plan, rnd)[:n]


def ask_ours(base: str, quick: bool, hits_of: dict[str, list]) -> list[float]:
    """Ingest the corpus into a collection, then ask each question through /ask; the
    retrieved chunks are kept for llama-server (`hits_of`)."""
    docs, asked = ask_workload(quick)
    col = httpx.post(f"{base}/v1/collections", json={"name": "spec"}, timeout=60).json()["id"]
    doc_qa.wait_ready(base, doc_qa.upload(base, col, docs))
    speeds = []
    for q in asked:
        if q not in hits_of:
            found = httpx.post(
                f"{base}/v1/collections/{col}/search",
                json={"query": q, "top_k": doc_qa.TOP_K},
                timeout=60,
            )
            hits_of[q] = found.json()["data"]
        body = {"question": q, "top_k": doc_qa.TOP_K, "max_tokens": REPLY, "ignore_eos": True}
        speeds.append(speed(stream(f"{base}/v1/collections/{col}/ask", body)))
    return speeds


def ask_peer(base: str, quick: bool, hits_of: dict[str, list]) -> list[float]:
    """The same questions with the chunks ours retrieved, in score order, through chat."""
    _, asked = ask_workload(quick)
    return [speed(ask(base, doc_qa.messages(q, hits_of[q]))) for q in asked if q in hits_of]


def scenarios(quick: bool) -> dict[str, list[list[dict]]]:
    n = 2 if quick else 6
    rnd = random.Random(27)
    plan = doc_qa_workload.QUICK if quick else doc_qa_workload.FULL
    docs = doc_qa_workload.corpus(plan, rnd)
    questions = doc_qa_workload.questions(plan, rnd)[:n]
    return {
        "quoting": [quoting_messages(i) for i in range(n)],
        "document answers": [document_messages(rnd, docs, q) for q in questions],
        "free text": [story_messages(i) for i in range(n)],
    }


def run_server(
    peer: peers.Peer, work: dict[str, list[list[dict]]], quick: bool, hits_of: dict[str, list]
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    with peer:
        base = peer.base_url
        ask(base, story_messages(99))  # warm up
        for name, prompts in work.items():
            out[name] = [speed(ask(base, m)) for m in prompts]
        if peer.name.startswith("ours"):
            out[ASKED] = ask_ours(base, quick, hits_of)
        else:  # after an ours server in the round (the order puts one first in round 1)
            out[ASKED] = ask_peer(base, quick, hits_of)
        busy = []
        for round_ in range(2):
            prompts = [quoting_messages(100 + 4 * round_ + i) for i in range(4)]
            t0 = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                results = list(pool.map(lambda m: ask(base, m), prompts))
            wall = time.perf_counter() - t0
            busy.append(sum(r.completion_tokens for r in results) / wall)
        out["4 busy slots"] = busy
    return out


def run(model: str, quick: bool = False, rounds: int = 2) -> dict:
    work = scenarios(quick)
    hits_of: dict[str, list] = {}  # question -> the chunks ours retrieved
    speeds: dict[str, dict[str, list[float]]] = {s: {} for s in SERVERS}
    for r in range(rounds):
        order = SERVERS if r % 2 == 0 else tuple(reversed(SERVERS))
        for name in order:
            print(f"round {r + 1}: {name}", file=sys.stderr, flush=True)
            for row, values in run_server(make(name, model), work, quick, hits_of).items():
                speeds[name].setdefault(row, []).extend(values)
    rows = {row: {s: statistics.mean(speeds[s][row]) for s in SERVERS} for row in speeds["ours"]}
    return {"quick": quick, "rows": rows}


def targets(report: dict) -> list[Target]:
    rows = report["rows"]

    def row(name: str, label: str, other: str, bound: float) -> Target:
        return target(label, rows[name]["ours"], rows[name][other], bound, at_most=False)

    return [
        row("quoting", "speculation: quoting answer, vs llama-server spec",
            "llama-server-spec", 1.1),
        row(ASKED, "speculation: document answers (ours /ask), vs llama-server spec",
            "llama-server-spec", 1.1),
        row("free text", "speculation: free text, vs ours without (not llama-server)",
            "ours-no-spec", 0.97),
        row("4 busy slots", "speculation: 4 busy slots, vs ours without (not llama-server)",
            "ours-no-spec", 1.0),
    ]  # fmt: skip


def markdown(report: dict) -> str:
    lines = [
        f"Speculative decoding: greedy replies of {REPLY} tokens, decode tokens/s (4 busy "
        "slots: aggregate over the wall time); ours with `--spec-type ngram-docs`, ours with "
        "none, llama-server with `--spec-type ngram-simple`.",
        "",
        "| row | " + " | ".join(SERVERS) + " |",
        "|---|" + "---:|" * len(SERVERS),
    ]
    for row, values in report["rows"].items():
        lines.append(f"| {row} | " + " | ".join(f"{values[s]:.1f}" for s in SERVERS) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.speculation")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    from app.config import packaged_model_path

    report = run(packaged_model_path(), args.quick)
    print(markdown(report))
    print("\n".join(table_lines(targets(report))))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "speculation-quick" if args.quick else "speculation"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
