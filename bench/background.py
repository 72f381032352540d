"""A client request while documents are ingested and prefilled, against the same request idle.

    python -m bench.background [--quick] [--out DIR]

One server (ours, the bench's flags: -np 4 -c 8192 -t 2, default document prefill). The client
request is a plain chat with ~400 new prompt tokens (a fresh document each time, so nothing is
cached) and 8 reply tokens, timed to its first token (streamed):
- idle: before any document is uploaded, and again once every document is ingested and
  prefilled (half the idle requests each side, so a drift of the machine lands on both);
- busy: right after N documents (~1,500 tokens each) are uploaded, one request after another
  with a short pause between them, while the server embeds and prefills them. A busy request
  counts only if background work was still pending when it ended (else the row says so).
The row's ratio is busy / idle mean TTFT (target <= 1.2). `python -m bench.compare` runs it
after its other rows (`--no-background` skips it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import peers
from bench.client import Result, stream_chat
from bench.core import long_document, nonce
from bench.server_process import ROOT
from bench.targets import Target, target

RESULTS = ROOT / "bench" / "results"
NAME = "chat TTFT while documents are ingested and prefilled"


@dataclass(frozen=True)
class Plan:
    documents: int  # uploaded at once
    doc_paragraphs: int  # ~65 tokens each
    idle: int  # idle requests, half before the documents and half after
    busy: int  # requests while the documents are worked on
    gap_s: float  # pause between busy requests


FULL = Plan(documents=24, doc_paragraphs=23, idle=8, busy=8, gap_s=0.5)
QUICK = Plan(documents=4, doc_paragraphs=8, idle=2, busy=2, gap_s=0.2)


def client_request(base: str) -> Result:
    """~400 prompt tokens that no cache holds, 8 reply tokens."""
    text = long_document(6, seed=nonce())
    messages = [{"role": "user", "content": f"{text}\n\nSummarize section 3 in one line."}]
    return stream_chat(base, messages, max_tokens=8)


def pending(base: str, ids: list[str]) -> int:
    """Documents not yet ingested and prefilled (prefill done, failed or off counts as done)."""
    n = 0
    for doc_id in ids:
        doc = httpx.get(f"{base}/v1/documents/{doc_id}", timeout=60).json()
        if doc["status"] in ("queued", "processing") or doc.get("prefill") == "queued":
            n += 1
    return n


def run(model: str, quick: bool) -> dict:
    plan = QUICK if quick else FULL
    out: dict = {"plan": plan.__dict__}
    with peers.ours(model) as peer:
        base = peer.base_url
        col = httpx.post(f"{base}/v1/collections", json={"name": "bg"}, timeout=60).json()["id"]
        # One small document first: loads the embedder, which the idle requests must not pay.
        first = httpx.post(
            f"{base}/v1/collections/{col}/documents",
            json={"filename": "warmup.txt", "text": "A first note to load the embedder."},
            timeout=60,
        ).json()["id"]
        while pending(base, [first]):
            time.sleep(0.05)
        client_request(base)  # warm-up
        idle = [client_request(base) for _ in range(plan.idle // 2)]
        t0 = time.perf_counter()
        ids = [
            httpx.post(
                f"{base}/v1/collections/{col}/documents",
                json={"filename": f"d{i}.txt", "text": long_document(plan.doc_paragraphs)},
                timeout=60,
            ).json()["id"]
            for i in range(plan.documents)
        ]
        busy, overlapped = [], 0
        for _ in range(plan.busy):
            time.sleep(plan.gap_s)
            busy.append(client_request(base))
            overlapped += pending(base, ids) > 0
        while pending(base, ids):
            time.sleep(0.2)
        out["background_s"] = time.perf_counter() - t0
        idle += [client_request(base) for _ in range(plan.idle - plan.idle // 2)]
    out["idle"] = [r.ttft for r in idle]
    out["busy"] = [r.ttft for r in busy]
    out["busy_overlapped"] = overlapped
    out["idle_mean"] = statistics.fmean(out["idle"])
    out["busy_mean"] = statistics.fmean(out["busy"])
    out["prompt_tokens"] = busy[0].prompt_tokens
    return out


def targets(report: dict) -> list[Target]:
    if "busy_mean" not in report:
        return []
    return [target(NAME, report["busy_mean"], report["idle_mean"], 1.2, at_most=True)]


def markdown(report: dict) -> str:
    plan = report["plan"]
    lines = [
        f"Background work: {plan['documents']} documents of ~{65 * plan['doc_paragraphs']} "
        f"tokens uploaded at once, ingested and prefilled in {report['background_s']:.1f} s; a "
        f"chat request of {report['prompt_tokens']} prompt tokens (nothing cached), "
        f"{len(report['busy'])} times meanwhile ({report['busy_overlapped']} of them ended with "
        f"background work still pending) and {len(report['idle'])} times on the idle server.",
        "",
        "| requests | mean TTFT s | max s |",
        "|---|---:|---:|",
        f"| idle server | {report['idle_mean']:.3f} | {max(report['idle']):.3f} |",
        f"| during ingestion and prefill | {report['busy_mean']:.3f} | {max(report['busy']):.3f} |",
    ]
    for _, ratio, bound, verdict in targets(report):
        lines += ["", f"during / idle, mean TTFT: {ratio:.2f} ({bound}: {verdict})"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.background", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="a few small documents: a smoke test")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    report = run(packaged_model_path(), args.quick)
    table = markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "background-quick" if args.quick else "background"
    (args.out / f"{stem}.md").write_text(f"# Background work\n\n{table}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
