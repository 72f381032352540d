"""Ingestion speed and retrieval quality per embedding backend.

    python -m bench.ingest [--quick] [--rounds N] [--large [N]] [--out DIR]

End to end through a real server (default flags but `--embedding-backend`): the time from
uploading to every document `ready`, as chunks/s, on the doc-QA bench's corpus (bench/doc_qa_
workload.py) and on two real PDFs (Debian's libtasn1 and shared-mime-info manuals where
installed, else two generated ones). Each variant gets a fresh server; one small document is
ingested first, so the embedder's load is timed apart. Variants are alternated within each
round (a drift of a shared machine lands on all of them) and their medians compared with
`before`: the torch fp32 embedder on one thread, the configuration before the
embedding backends.

Retrieval quality (bench/workloads/ingest_quality.py): recall@4 and MRR of every backend against
fp32, in-process. `--large`: the 20,000-chunk collection (bench/workloads/ingest_large.py). `python
-m bench.compare` runs this without `--large` (`--no-ingest` skips it).
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

from bench.lib.server_process import ROOT, ServerProcess
from bench.lib.targets import Target, target
from bench.workloads import ingest_quality
from bench.workloads.doc_qa_workload import FULL, QUICK, corpus

RESULTS = ROOT / "bench" / "results"
REAL_PDFS = (
    Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
    Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
)
BEFORE = "before"
VARIANTS = {  # name -> server flags
    BEFORE: ["--embedding-backend", "torch", "--embedding-threads", "1"],
    "torch": ["--embedding-backend", "torch"],
    "torch-int8": ["--embedding-backend", "torch-int8"],
    "onnx-int8": ["--embedding-backend", "onnx-int8"],
}
DEFAULT = "onnx-int8"


def pdfs() -> list[tuple[str, bytes]]:
    found = [(p.name, p.read_bytes()) for p in REAL_PDFS if p.is_file()]
    if len(found) == len(REAL_PDFS):
        return found
    from fpdf import FPDF  # a fresh machine without the manuals: two of our own docs

    out = []
    for name in ("deployment.md", "kv-reuse.md"):
        pdf = FPDF()
        pdf.set_font("helvetica", size=10)
        text = (ROOT / "docs" / name).read_text().encode("latin-1", "replace").decode("latin-1")
        for page in range(0, len(text), 3000):
            pdf.add_page()
            pdf.multi_cell(0, 5, text[page : page + 3000])
        out.append((name.replace(".md", ".pdf"), bytes(pdf.output())))
    return out


def collection(base: str, name: str) -> str:
    return httpx.post(f"{base}/v1/collections", json={"name": name}, timeout=60).json()["id"]


def timed_upload(base: str, files: list[tuple[str, bytes]]) -> dict:
    """Chunks/s from the first upload to the last document ready, as a client that keeps its
    connection sees it (a new httpx client per call costs tens of ms of its own)."""
    col = collection(base, f"c{time.monotonic_ns()}")
    with httpx.Client(base_url=base, timeout=60) as client:
        t0 = time.perf_counter()
        ids = []
        for name, data in files:
            r = client.post(f"/v1/collections/{col}/documents", files={"file": (name, data)})
            r.raise_for_status()
            ids.append(r.json()["id"])
        chunks = all_ready(client, col, len(ids))
        seconds = time.perf_counter() - t0
    return {"chunks": chunks, "s": seconds, "chunks_per_s": chunks / seconds, "ids": ids}


def all_ready(client: httpx.Client, col: str, n: int) -> int:
    """Total chunks once the collection's `n` documents are ready (one request a poll)."""
    while True:
        docs = client.get(f"/v1/collections/{col}/documents").json()["data"]
        failed = [d for d in docs if d["status"] == "error"]
        if failed:
            raise RuntimeError(f"{failed[0]['id']}: {failed[0]['error']}")
        if len(docs) == n and all(d["status"] == "ready" for d in docs):
            return sum(d["n_chunks"] for d in docs)
        time.sleep(0.02)


def wait_prefilled(base: str, ids: list[str], limit_s: float = 300.0) -> None:
    """Until no document's prefill into the prefix cache is still to run: the next timing
    starts on an engine with nothing left to compute."""
    end = time.monotonic() + limit_s
    for doc_id in ids:
        while time.monotonic() < end:
            doc = httpx.get(f"{base}/v1/documents/{doc_id}", timeout=60).json()
            if doc.get("prefill") != "queued":
                break
            time.sleep(0.1)


class TreeServer(ServerProcess):
    """Our server from another source tree (the code before a change: `git archive REV | tar
    -x -C DIR`), on this venv."""

    def __init__(self, tree: Path, *args: str) -> None:
        super().__init__(*args)
        boot = (
            "import os, runpy, sys; os.chdir(sys.argv[1]); sys.path.insert(0, sys.argv[1]); "
            "sys.argv = ['app', *sys.argv[2:]]; runpy.run_module('app', run_name='__main__')"
        )
        self.command = [sys.executable, "-c", boot, str(tree.resolve()), *self.args]


def one_corpus(flags: list[str], files: list[tuple[str, bytes]], tree: Path | None) -> dict:
    """A fresh server: one small document loads the embedder (and is prefilled), then the
    corpus is timed. A server per corpus, so no corpus's prefill (which follows its ingestion
    with default flags) runs beside another corpus's timing."""
    with TreeServer(tree, *flags) if tree else ServerProcess(*flags) as server:
        base = server.base_url
        t0 = time.perf_counter()
        warm = timed_upload(base, [("warm.txt", b"One small document loads the embedder.")])
        first_ready_s = time.perf_counter() - t0
        wait_prefilled(base, warm["ids"])
        return {"first_ready_s": first_ready_s, **timed_upload(base, files)}


def one_server(
    flags: list[str], docs: list[tuple[str, bytes]], pdf_files: list, tree: Path | None = None
) -> dict:
    doc_qa = one_corpus(flags, docs, tree)
    pdfs = one_corpus(flags, pdf_files, tree)
    return {"first_ready_s": doc_qa["first_ready_s"], "doc_qa": doc_qa, "pdfs": pdfs}


def run(
    model: str | None = None,
    quick: bool = False,
    rounds: int = 2,
    variants: list[str] | None = None,
    quality: bool = True,
    before_tree: Path | None = None,
) -> dict:
    """Every variant `rounds` times, alternated; medians per variant and corpus."""
    plan = QUICK if quick else FULL
    docs = [(n, t.encode()) for n, _, t in corpus(plan, random.Random(1))]
    pdf_files = pdfs()
    names = variants or ([BEFORE, DEFAULT] if quick else list(VARIANTS))
    model_flags = ["-m", model] if model else []
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(1 if quick else rounds):
        for name in names if r % 2 == 0 else reversed(names):
            print(f"round {r + 1}: {name}", flush=True)
            if name == BEFORE and before_tree is not None:  # the old code, its defaults
                runs[name].append(one_server(model_flags, docs, pdf_files, before_tree))
            else:
                runs[name].append(one_server([*model_flags, *VARIANTS[name]], docs, pdf_files))
    report: dict = {"variants": {}, "pdfs": [n for n, _ in pdf_files], "quick": quick}
    report["before"] = str(before_tree) if before_tree else "torch fp32, 1 thread, this code"
    for name, got in runs.items():
        report["variants"][name] = {
            corpus_name: statistics.median(g[corpus_name]["chunks_per_s"] for g in got)
            for corpus_name in ("doc_qa", "pdfs")
        } | {
            "first_ready_s": statistics.median(g["first_ready_s"] for g in got),
            "chunks": {k: got[0][k]["chunks"] for k in ("doc_qa", "pdfs")},
            "runs": got,
        }
    report["quality"] = ingest_quality.run(quick=quick) if quality else {"sets": {}}
    return report


def targets(report: dict) -> list[Target]:
    variants, rows = report["variants"], []
    if BEFORE in variants and DEFAULT in variants:
        for corpus_name in ("doc_qa", "pdfs"):
            ours, before = variants[DEFAULT][corpus_name], variants[BEFORE][corpus_name]
            rows.append(
                target(f"ingestion chunks/s, {corpus_name}", ours, before, 3.0, at_most=False)
            )
    return rows + ingest_quality.targets(report["quality"])


def markdown(report: dict, with_targets: bool = True) -> str:
    lines = [
        "Ingestion, end to end (upload to ready), medians; ratio to `before` (torch fp32, 1 "
        "thread):",
        "",
        "| variant | doc-QA chunks/s | ratio | PDFs chunks/s | ratio | first document ready s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    before = report["variants"].get(BEFORE)
    for name, v in report["variants"].items():
        qa = v["doc_qa"] / before["doc_qa"] if before else float("nan")
        pdf = v["pdfs"] / before["pdfs"] if before else float("nan")
        lines.append(
            f"| {name} | {v['doc_qa']:.1f} | {qa:.2f} | {v['pdfs']:.1f} | {pdf:.2f} | "
            f"{v['first_ready_s']:.1f} |"
        )
    some = next(iter(report["variants"].values()))["chunks"]
    lines += [
        "",
        f"Chunks: doc-QA {some['doc_qa']}, PDFs {some['pdfs']} ({', '.join(report['pdfs'])}).",
        "",
    ]
    lines += [ingest_quality.markdown(report["quality"]), ""]
    if report.get("large"):
        from bench.workloads import ingest_large

        lines += [ingest_large.markdown(report["large"]), ""]
    if not with_targets:  # bench.compare lists them in its Targets table
        return "\n".join(lines) + "\n"
    lines += ["| target | ratio | bound | |", "|---|---:|---|---|"]
    for name, ratio, bound, verdict in targets(report):
        lines.append(
            f"| {name} | {'–' if ratio is None else f'{ratio:.2f}'} | {bound} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small corpus, before and default only")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--large", type=int, nargs="?", const=20_000, default=0, metavar="CHUNKS")
    p.add_argument("--no-servers", action="store_true", help="quality (and --large) only")
    p.add_argument("--variants", help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--no-quality", action="store_true", help="skip recall@4 and MRR")
    p.add_argument(
        "--before-tree", type=Path, help="run `before` from this source tree (the old code)"
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    if args.no_servers:
        report = {"variants": {}, "pdfs": [], "quality": ingest_quality.run(quick=args.quick)}
    else:
        chosen = args.variants.split(",") if args.variants else None
        report = run(
            quick=args.quick,
            rounds=args.rounds,
            variants=chosen,
            quality=not args.no_quality,
            before_tree=args.before_tree,
        )
    if args.large:
        from bench.workloads import ingest_large

        report["large"] = ingest_large.run(args.large)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "ingest-quick" if args.quick else "ingest"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    table = markdown(report) if report["variants"] else _partial(report)
    (args.out / f"{stem}.md").write_text(table)
    print("\n" + table)
    return 0


def _partial(report: dict) -> str:
    out = [ingest_quality.markdown(report["quality"])]
    if report.get("large"):
        from bench.workloads import ingest_large

        out.append(ingest_large.markdown(report["large"]))
    return "\n\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
