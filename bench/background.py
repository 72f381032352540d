"""A client request while documents are ingested and prefilled, against the same request idle.

    python -m bench.background [--quick] [--chunk-kv] [--out DIR]

One server (ours, the bench's flags: -np 4 -c 8192 -t 2, default document prefill). The client
request is a plain chat with ~400 new prompt tokens (a fresh document each time, so nothing is
cached) and 8 reply tokens, timed to its first token (streamed):
- idle: before any document is uploaded, and again once every document is ingested and
  prefilled (half the idle requests each side, so a drift of the machine lands on both);
- busy: right after N documents (~1,500 tokens each) are uploaded, one request after another
  with a short pause between them, while the server embeds and prefills them. A busy request
  counts only if background work was still pending when it ended (else the row says so).
The row's ratio is busy / idle mean TTFT (target <= 1.2).

The chunk KV row: in a collection that blends, each chunk's own KV is computed in the background
after the documents' prefixes. Each round is a fresh server: the same chat request on the truly
idle server (before any upload), then D documents uploaded to a collection that blends and,
once every one is ready and their prefixes are computed (a document's `kv` says `running`), the
request again while chunk KV is being computed (`/metrics`: background tasks queued or running),
so idle and busy requests alternate round by round. The ratio is busy / idle mean TTFT over all
rounds (target <= 1.2); a busy request counts only if chunk KV work was still pending when it
ended. `python -m bench.compare` runs both rows after its other rows (`--no-background` skips
them); `--chunk-kv` runs the chunk KV row alone.
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

from bench.lib import peers
from bench.lib.client import Result, stream_chat
from bench.lib.core import long_document, nonce
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, target

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
CHUNK_NAME = "chat TTFT while chunk KV is computed"


@dataclass(frozen=True)
class ChunkPlan:
    rounds: int  # fresh servers, one after another
    documents: int  # uploaded at once to a collection that blends
    doc_paragraphs: int  # ~65 tokens each
    requests: int  # idle requests, and busy ones, per round
    gap_s: float  # pause before each busy request


CHUNK_FULL = ChunkPlan(rounds=3, documents=6, doc_paragraphs=23, requests=3, gap_s=0.5)
CHUNK_QUICK = ChunkPlan(rounds=1, documents=2, doc_paragraphs=8, requests=1, gap_s=0.2)


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


def run(model: str, quick: bool, ingestion: bool = True) -> dict:
    """Both rows (`ingestion` False: the chunk KV row alone)."""
    out = run_ingestion(model, quick) if ingestion else {}
    out["chunk_kv"] = run_chunk_kv(model, quick)
    return out


def run_ingestion(model: str, quick: bool) -> dict:
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
        ids = upload(base, col, plan.documents, plan.doc_paragraphs)
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


def chunk_kv_pending(base: str) -> int:
    """Chunk KV requests queued or running (/metrics)."""
    text = httpx.get(f"{base}/metrics", timeout=60).text
    prefixes = (
        'kvchat_background_tasks_queued{kind="chunk_kv"}',
        'kvchat_background_tasks_running{kind="chunk_kv"}',
    )
    return sum(
        int(float(line.split()[-1])) for line in text.splitlines() if line.startswith(prefixes)
    )


def upload(base: str, col: str, documents: int, paragraphs: int) -> list[str]:
    """`documents` fresh documents of `paragraphs` paragraphs into `col`: their ids."""
    return [
        httpx.post(
            f"{base}/v1/collections/{col}/documents",
            json={"filename": f"d{i}.txt", "text": long_document(paragraphs)},
            timeout=60,
        ).json()["id"]
        for i in range(documents)
    ]


def chunk_kv_round(model: str, plan: ChunkPlan) -> dict:
    """One fresh server: idle requests before any upload, then requests while chunk KV runs."""
    # --blend-force: chunk KV is computed only where blend is on, and the packaged SmolLM2 does
    # not pass blend's quality gate.
    with peers.ours(model, extra=("--blend-force",)) as peer:
        base = peer.base_url
        client_request(base)  # warm-up
        idle = [client_request(base).ttft for _ in range(plan.requests)]
        body = {"name": "bg", "kv_reuse": "blend"}
        col = httpx.post(f"{base}/v1/collections", json=body, timeout=60).json()["id"]
        t0 = time.perf_counter()
        ids = upload(base, col, plan.documents, plan.doc_paragraphs)
        while not any(
            (httpx.get(f"{base}/v1/documents/{i}", timeout=60).json().get("kv") or {}).get("state")
            in ("running", "done")
            for i in ids
        ):
            time.sleep(0.1)
        started = time.perf_counter() - t0
        busy, overlapped = [], 0
        for _ in range(plan.requests):
            time.sleep(plan.gap_s)
            busy.append(client_request(base).ttft)
            overlapped += chunk_kv_pending(base) > 0
    return {"idle": idle, "busy": busy, "overlapped": overlapped, "chunk_kv_from_s": started}


def run_chunk_kv(model: str, quick: bool) -> dict:
    plan = CHUNK_QUICK if quick else CHUNK_FULL
    rounds = [chunk_kv_round(model, plan) for _ in range(plan.rounds)]
    idle = [t for r in rounds for t in r["idle"]]
    busy = [t for r in rounds for t in r["busy"]]
    return {
        "plan": plan.__dict__,
        "rounds": rounds,
        "idle_mean": statistics.fmean(idle),
        "busy_mean": statistics.fmean(busy),
        "overlapped": sum(r["overlapped"] for r in rounds),
    }


def targets(report: dict) -> list[Target]:
    out = []
    if "busy_mean" in report:
        out.append(target(NAME, report["busy_mean"], report["idle_mean"], 1.2, at_most=True))
    chunk = report.get("chunk_kv")
    if chunk:
        out.append(target(CHUNK_NAME, chunk["busy_mean"], chunk["idle_mean"], 1.2, at_most=True))
    return out


def chunk_markdown(chunk: dict) -> list[str]:
    plan = chunk["plan"]
    lines = [
        "",
        f"Chunk KV: {plan['rounds']} rounds, each a fresh server: the request {plan['requests']} "
        f"times before any upload, then {plan['documents']} documents of "
        f"~{65 * plan['doc_paragraphs']} tokens uploaded to a collection that blends and the "
        f"request {plan['requests']} times while their chunks' KV is computed "
        f"({chunk['overlapped']} of them ended with chunk KV still pending).",
        "",
        "| round | idle mean TTFT s | during chunk KV s | ratio |",
        "|---|---:|---:|---:|",
    ]
    for i, r in enumerate(chunk["rounds"], 1):
        idle, busy = statistics.fmean(r["idle"]), statistics.fmean(r["busy"])
        lines.append(f"| {i} | {idle:.3f} | {busy:.3f} | {busy / idle:.2f} |")
    ratio = chunk["busy_mean"] / chunk["idle_mean"]
    lines.append(f"| all | {chunk['idle_mean']:.3f} | {chunk['busy_mean']:.3f} | {ratio:.2f} |")
    return lines


def markdown(report: dict) -> str:
    lines = [] if "plan" not in report else ingestion_markdown(report)
    if report.get("chunk_kv"):
        lines += chunk_markdown(report["chunk_kv"])
    for name, ratio, bound, verdict in targets(report):
        lines += ["", f"{name}, during / idle mean TTFT: {ratio:.2f} ({bound}: {verdict})"]
    return "\n".join(lines).lstrip("\n") + "\n"


def ingestion_markdown(report: dict) -> list[str]:
    plan = report["plan"]
    return [
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.background", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="a few small documents: a smoke test")
    p.add_argument("--chunk-kv", action="store_true", help="the chunk KV row alone")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    report = run(packaged_model_path(), args.quick, ingestion=not args.chunk_kv)
    table = markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "background-quick" if args.quick else "background"
    stem += "-chunk-kv" if args.chunk_kv else ""
    (args.out / f"{stem}.md").write_text(f"# Background work\n\n{table}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
