"""Speculative decoding, side by side: ours against llama-server with `--spec-type ngram-simple`.

    python -m bench.speculation [--quick] [--out DIR]

The servers run side by side and take each request in turn, the order rotated from one request
to the next (this machine's speed drifts by 10-20% from minute to minute, so servers measured one
after the other differ by more than what is measured); each round starts from the other end:
- ours: `--spec-type ngram-docs`;
- ours, no speculation: default flags (`--spec-type none`);
- llama-server: `--spec-type ngram-simple` (its defaults: 12-token n-gram, 48-token draft).
All with the bench's flags (-np 4 -c 8192 -t 2), greedy, `ignore_eos` so every reply has the
same length; ours with `--idle-prefill-delay -1` (no background work while another server is
measured). Rows (decode speed = (reply tokens - 1) / (end - first token)):
- quoting: a document in the prompt, asked to quote it;
- document answers: the doc-QA workload's documents in the prompt (as llama-server is fed
  them), its questions;
- document answers, as each server is used: the doc-QA workload's documents in a collection of
  ours, its questions through `/ask` (retrieval, our layout, the replies earlier questions on the
  same documents got as a draft source; each round a new collection, so no reply is remembered
  at its start), and llama-server fed the same retrieved chunks in score order through chat
  (bench.doc_qa's prompt);
- free text: a story, nothing to copy;
- 4 busy slots: four quoting requests at once, aggregate tokens per second over the wall time
  (six bursts a round, each server first in two).
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
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench import doc_qa
from bench.lib import peers
from bench.lib.client import Result, stream, stream_chat
from bench.lib.core import long_document
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, table_lines, target
from bench.workloads import doc_qa_workload

RESULTS = ROOT / "bench" / "results"
REPLY = 128
SERVERS = ("ours", "ours-no-spec", "llama-server-spec")
OURS = ("ours", "ours-no-spec")
# Ours prefill a chat's next turn when idle: off here, where an idle server's background work
# would run while another is measured (it makes no token of a reply faster).
QUIET = ("--idle-prefill-delay", "-1")
# Samples of the 4-busy-slots row per server and round, two per server order (each server
# first twice): a sample is one burst of a few seconds, and the row is a mean of them. A burst
# moves by 10% or more with the machine's speed, and the two servers of the row's target make
# about the same steps there (drafts seldom pay in a busy batch), so the row needs many.
BUSY_SAMPLES = 2 * len(SERVERS)


def make(name: str, model: str) -> peers.Peer:
    if name == "ours":
        return peers.ours(model, extra=("--spec-type", "ngram-docs", *QUIET))
    if name == "ours-no-spec":
        peer = peers.ours(model, extra=QUIET)
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


def ingest(base: str, quick: bool) -> str:
    """A new collection of the doc-QA corpus on one of ours, once its documents are ready and
    prefilled (so that no background work runs while another server is measured); its id. A
    new collection has documents of its own: no replies remembered on them yet."""
    docs, _ = ask_workload(quick)
    col = httpx.post(f"{base}/v1/collections", json={"name": "spec"}, timeout=60).json()["id"]
    ids = doc_qa.upload(base, col, docs)
    doc_qa.wait_ready(base, ids)
    doc_qa.wait_prefilled(base, ids)
    return col


def ask_ours(base: str, col: str, question: str) -> float:
    body = {
        "question": question,
        "top_k": doc_qa_workload.TOP_K,
        "max_tokens": REPLY,
        "ignore_eos": True,
    }
    return speed(stream(f"{base}/v1/collections/{col}/ask", body))


def ask_peer(base: str, question: str, hits: list) -> float:
    """The question with the chunks ours retrieved, in score order, through chat."""
    return speed(ask(base, doc_qa.messages(question, hits)))


def retrieved(base: str, col: str, questions: list[str]) -> dict[str, list]:
    """The chunks ours retrieves for each question: what llama-server is fed."""
    body = {"top_k": doc_qa_workload.TOP_K}
    return {
        q: httpx.post(
            f"{base}/v1/collections/{col}/search", json={"query": q, **body}, timeout=60
        ).json()["data"]
        for q in questions
    }


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


def turns(order: tuple[str, ...], i: int) -> tuple[str, ...]:
    """The servers in turn for the i-th request: the order rotated by i."""
    k = i % len(order)
    return order[k:] + order[:k]


def busy(base: str, round_: int) -> float:
    """Four quoting requests at once: aggregate tokens per second over the wall time."""
    prompts = [quoting_messages(100 + 4 * round_ + i) for i in range(4)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda m: ask(base, m), prompts))
    return sum(r.completion_tokens for r in results) / (time.perf_counter() - t0)


def run(model: str, quick: bool = False, rounds: int = 2) -> dict:
    work = scenarios(quick)
    _, questions = ask_workload(quick)
    speeds: dict[str, dict[str, list[float]]] = {s: {} for s in SERVERS}

    def note(name: str, row: str, value: float) -> None:
        speeds[name].setdefault(row, []).append(value)

    with ExitStack() as stack:
        base = {name: stack.enter_context(make(name, model)).base_url for name in SERVERS}
        for name in SERVERS:
            ask(base[name], story_messages(99))  # warm up
        for r in range(rounds):
            print(f"round {r + 1}", file=sys.stderr, flush=True)
            order = SERVERS if r % 2 == 0 else tuple(reversed(SERVERS))
            for row, prompts in work.items():
                for i, messages in enumerate(prompts):
                    for name in turns(order, i):
                        note(name, row, speed(ask(base[name], messages)))
            cols = {name: ingest(base[name], quick) for name in SERVERS if name in OURS}
            hits = retrieved(base[OURS[0]], cols[OURS[0]], questions)
            for i, q in enumerate(questions):
                for name in turns(order, i):
                    mine = name in cols
                    s = (
                        ask_ours(base[name], cols[name], q)
                        if mine
                        else ask_peer(base[name], q, hits[q])
                    )
                    note(name, ASKED, s)
            for i in range(BUSY_SAMPLES):
                for name in turns(order, i):
                    note(name, "4 busy slots", busy(base[name], BUSY_SAMPLES * r + i))
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
    from app.config_derived import packaged_model_path

    report = run(packaged_model_path(), args.quick)
    print(markdown(report))
    print("\n".join(table_lines(targets(report))))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "speculation-quick" if args.quick else "speculation"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
