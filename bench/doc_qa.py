"""Document QA: our retrieval layout against llama-server fed the same retrieved chunks.

    python -m bench.doc_qa [--quick] [--servers ours,llama-server] [--out DIR]

A corpus of generated documents (one topic each) goes into a collection on our server; then
questions over Zipf-popular topics are asked (top 4 chunks; both from
bench/workloads/doc_qa_workload.py):
- ours: `POST /v1/collections/{id}/ask` (the chunks laid out cached-first, then canonical),
  asked once the server has prefilled the documents into its cache while idle; and again on
  a server started with `--doc-prefill-tokens 0` (the layout alone);
- llama-server, score order: the same chunks, as a typical RAG app sends them (best first,
  numbered by rank) through /v1/chat/completions;
- llama-server, canonical order: the same chunks in our canonical order (document, ordinal);
- ours, blend: the same questions on a server started with `--kv-reuse blend` (chunk KV reused
  at any position, docs/blend.md);
- new combinations (ours with prefix reuse, and with blend): after the questions, questions
  whose search is restricted to the documents of two earlier retrieved sets, so that their
  chunks were seen before but rarely as this set (`seen` is the share of retrieved chunks that
  earlier questions had retrieved).
Each row: mean/p50/p95 TTFT over the questions and the share of prompt tokens served from
cache. Also printed: ingestion time, embedding chunks/s and retrieval ms per question.
llama-server runs only when built (`make llama-server`); `--servers ours` runs ours alone.
`python -m bench.compare` runs the same `run()` after its other rows (`--no-doc-qa` skips it),
and its Targets table holds this one: ours' mean TTFT at most 0.5x llama-server's in score order
(the targets and the table: bench/lib/doc_qa_report.py).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

from bench.lib import peers
from bench.lib.client import Result, stream, stream_chat
from bench.lib.doc_qa_report import BLEND, NEW, NEW_BLEND, NO_PREFILL, SCORE_ORDER, markdown
from bench.lib.server_process import ROOT
from bench.workloads.doc_qa_workload import FULL, QUICK, TOP_K, Plan, corpus, questions

RESULTS = ROOT / "bench" / "results"
MAX_TOKENS = 8
# The prompt text around the chunks, as our server builds it (app/docs/questions/doc_prompt.py).
SYSTEM = (
    "You answer questions from the numbered sources you are given. Cite the sources you use by "
    "their number, like [1]. If the sources do not hold the answer, say so."
)


def chunk_block(number: int, hit: dict) -> str:
    page = f", p. {hit['page']}" if hit["page"] is not None else ""
    return f"[{number}] {hit['filename']}{page}\n{hit['text']}\n\n"


def messages(question: str, hits: list[dict]) -> list[dict]:
    sources = "".join(chunk_block(i + 1, h) for i, h in enumerate(hits))
    user = f"Sources:\n\n{sources}Question: {question}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def upload(base: str, col: str, docs: list[tuple[str, str, str]]) -> list[str]:
    """Upload the corpus's (filename, topic, text) documents; their ids."""
    return [
        httpx.post(
            f"{base}/v1/collections/{col}/documents",
            json={"filename": name, "text": text},
            timeout=120,
        ).json()["id"]
        for name, _, text in docs
    ]


def wait_ready(base: str, ids: list[str]) -> int:
    """Total chunks once every document is ready."""
    total = 0
    for doc_id in ids:
        while True:
            doc = httpx.get(f"{base}/v1/documents/{doc_id}", timeout=60).json()
            if doc["status"] == "error":
                raise RuntimeError(f"{doc_id}: {doc['error']}")
            if doc["status"] == "ready":
                total += doc["n_chunks"]
                break
            time.sleep(0.05)
    return total


def summarize(results: list[Result]) -> dict:
    ttfts = sorted(r.ttft for r in results)
    prompt = sum(r.prompt_tokens or 0 for r in results)
    cached = sum(r.cached_tokens or 0 for r in results)
    return {
        "n": len(ttfts),
        "mean_ttft": statistics.fmean(ttfts),
        "p50_ttft": statistics.median(ttfts),
        "p95_ttft": ttfts[min(len(ttfts) - 1, round(0.95 * (len(ttfts) - 1)))],
        "cached_share": cached / prompt if prompt else None,
    }


def wait_prefilled(base: str, ids: list[str]) -> None:
    """Until the server has prefilled every document into its cache (--doc-prefill-tokens)."""
    for doc_id in ids:
        while httpx.get(f"{base}/v1/documents/{doc_id}", timeout=60).json()["prefill"] == "queued":
            time.sleep(0.05)


def new_combinations(
    base: str, col: str, sets: list[tuple[str, list]], rnd: random.Random
) -> tuple[list[Result], float]:
    """Questions over the documents of two earlier sets (see the module's doc); the results
    and the share of their chunks seen before."""
    seen = {h["chunk_id"] for _, hits in sets for h in hits}
    results, old, total = [], 0, 0
    for _ in range(len(sets) // 2):
        (qa, a), (_, b) = rnd.sample(sets, 2)
        docs = list(dict.fromkeys(h["document_id"] for h in [*a[:2], *b[:2]]))
        body = {"question": qa, "top_k": TOP_K, "max_tokens": MAX_TOKENS, "document_ids": docs}
        hits = httpx.post(
            f"{base}/v1/collections/{col}/search", json={"query": qa, **body}, timeout=60
        ).json()["data"]
        old += sum(h["chunk_id"] in seen for h in hits)
        total += len(hits)
        results.append(stream(f"{base}/v1/collections/{col}/ask", body))
    return results, old / total if total else 0.0


def run_ours(peer: peers.Peer, plan: Plan, seed: int = 1) -> tuple[dict, list[tuple[str, list]]]:
    """Ingest, then ask every question; returns the numbers and the retrieved sets.

    The questions start once the server has prefilled the documents (when it does): documents
    are uploaded ahead of the questions about them, and that prefill is what the server does
    with the time in between. `prefill_s` is ingestion and prefill together."""
    rnd = random.Random(seed)
    docs, asked = corpus(plan, rnd), questions(plan, rnd)
    out: dict = {}
    with peer:
        base = peer.base_url
        col = httpx.post(f"{base}/v1/collections", json={"name": "bench"}).json()["id"]
        # One small document first: loads the embedding model, so the timed ingestion is not.
        t0 = time.perf_counter()
        first = httpx.post(
            f"{base}/v1/collections/{col}/documents",
            json={"filename": "warmup.txt", "text": "A first note to load the embedder."},
        ).json()
        wait_ready(base, [first["id"]])
        out["embedder_load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ids = upload(base, col, docs)
        chunks = wait_ready(base, ids)
        out["ingest_s"] = time.perf_counter() - t0
        wait_prefilled(base, ids)
        out["prefill_s"] = time.perf_counter() - t0
        out["kv_reuse"] = httpx.get(f"{base}/props").json()["kv_reuse"]
        out["chunks"] = chunks
        out["chunks_per_s"] = chunks / out["ingest_s"]
        sets, results, retrieval = [], [], []
        for q in asked:
            hits = httpx.post(
                f"{base}/v1/collections/{col}/search", json={"query": q, "top_k": TOP_K}, timeout=60
            ).json()["data"]
            sets.append((q, hits))
            body = {"question": q, "top_k": TOP_K, "max_tokens": MAX_TOKENS}
            r = stream(f"{base}/v1/collections/{col}/ask", body)
            results.append(r)
            retrieval.append(r.timings.get("retrieval_ms", 0.0))
        out["retrieval_ms"] = statistics.fmean(retrieval)
        out["ours"] = summarize(results)
        combos, out["seen"] = new_combinations(base, col, sets, random.Random(seed + 1))
        out["new"] = summarize(combos)
    return out, sets


def run_llama_server(peer: peers.Peer, sets: list[tuple[str, list]]) -> dict:
    out = {}
    with peer:
        for name, order in [
            (SCORE_ORDER, lambda hits: sorted(hits, key=lambda h: -h["score"])),
            (
                "llama-server, canonical order",
                lambda hits: sorted(hits, key=lambda h: (h["document_id"], h["ordinal"])),
            ),
        ]:
            results = [
                stream_chat(peer.base_url, messages(q, order(hits)), max_tokens=MAX_TOKENS)
                for q, hits in sets
            ]
            out[name] = summarize(results)
    return out


BLEND_FLAGS = ("--kv-reuse", "blend", "--blend-force")


def run(model: str, quick: bool, servers: list[str], blend_k: tuple[int, ...] = ()) -> dict:
    """`blend_k`: more blend rows, each with its own --blend-sink-tokens (the default row takes
    the model's measured k, app/engine/blend/blend_gate.py). The blend servers are forced past the
    quality gate: these rows time blend on any model; the report carries the agreement with
    full prefill measured at the default k (docs/blend.md)."""
    plan = QUICK if quick else FULL
    report: dict = {"plan": plan.__dict__, "rows": {}, "failed": {}}
    ours, sets = run_ours(peers.make("ours", model, None), plan)
    report["rows"]["ours"] = ours.pop("ours")
    new = ours.pop("new")
    report.update(ours)
    blend, _ = run_ours(peers.ours(model, extra=BLEND_FLAGS), plan)
    report["blend_gate"] = blend["kv_reuse"]
    report["rows"][BLEND] = blend["ours"]
    report["blend_prefill_s"] = blend["prefill_s"]  # the chunks' own KV computed too
    report["rows"][NEW] = new
    report["rows"][NEW_BLEND] = blend["new"]
    for k in blend_k:
        extra = (*BLEND_FLAGS, "--blend-sink-tokens", str(k))
        blend_k_run, _ = run_ours(peers.ours(model, extra=extra), plan)
        report["rows"][f"{BLEND}, k={k}"] = blend_k_run["ours"]
        report["rows"][f"{NEW_BLEND}, k={k}"] = blend_k_run["new"]
    # The same questions without the document prefill: what the layout alone is worth.
    plain, _ = run_ours(peers.ours(model, extra=("--doc-prefill-tokens", "0")), plan)
    report["rows"][NO_PREFILL] = plain["ours"]
    if "llama-server" in servers:
        try:
            report["rows"].update(run_llama_server(peers.make("llama-server", model, None), sets))
        except (peers.PeerUnavailable, RuntimeError, httpx.HTTPError) as e:
            report["failed"]["llama-server"] = f"{type(e).__name__}: {e}"
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.doc_qa", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="a small corpus: a smoke test")
    p.add_argument("--servers", default="ours,llama-server", help="ours, llama-server")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a GGUF path")
    p.add_argument("--blend-sink-tokens", default="", help="more blend rows, one per k (e.g. 4,8)")
    args = p.parse_args(argv)
    from bench.blend_quality import MODELS

    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    model = MODELS[args.model]() if args.model in MODELS else args.model
    blend_k = tuple(int(k) for k in args.blend_sink_tokens.split(",") if k.strip())
    report = run(model, args.quick, servers, blend_k)
    table = markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "doc-qa-quick" if args.quick else "doc-qa"
    if args.model != "smollm2":
        stem += f"-{Path(args.model).stem}"
    (args.out / f"{stem}.md").write_text(f"# Document QA\n\n{table}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
