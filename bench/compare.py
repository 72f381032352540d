"""`python -m bench.compare` (`make bench`): every benchmark row, ours beside the other servers.

    python -m bench.compare [--quick] [--servers ours,llama-server,llama-cpp-python]
                            [--mmproj PATH|tiny] [--out DIR] [--no-docs]
                            [--no-decode-churn] [--no-doc-qa] [--no-long-doc-qa]
                            [--no-background]
                            [--no-ingest] [--no-speculation] [--no-cluster]

One run holds every comparison of the project, so one table answers "where do we stand", and
a change that helps one row and hurts another shows both:
1. prefix reuse (bench/prefix.py): every server up at once (bench/peers.py: same model file, 2
   threads, 8192 context, 4 slots), taking turns through every scenario in bench/core.py, then
   aggregate decode at 1 and 8 clients (one server at a time: the others are idle; ours and
   llama-server run each scenario and row 3 times, means of the runs). Cold
   references are the same prompt with a unique nonce at the very start (`core.fresh_prefix`):
   no server can reuse any of it, and it needs nothing but the OpenAI API. Every scenario makes
   fresh random documents, so no server starts warm;
2. single-stream decode and session churn (bench/decode_churn.py, `--no-decode-churn` skips):
   the bare decode loop of this machine, then ours and llama-server at 2 slots (`-np 2`), the
   single-stream requests alternating between them;
   llama-cpp-python serves one request at a time, so it has no slots to churn;
3. document QA (bench/doc_qa.py, `--no-doc-qa` skips): our collections against llama-server
   fed the same retrieved chunks; then long-document QA (bench/long_doc_qa.py,
   `--no-long-doc-qa` skips): vLLM's and LMCache's benchmark, a cold round of long prompts 4 at
   a time, then the same prompts again in a random order;
4. background work (bench/background.py, `--no-background` skips): ours alone, a chat request
   while documents are ingested and prefilled against the same request on the idle server;
   then ingestion speed and retrieval quality per embedding backend (bench/ingest.py,
   `--no-ingest` skips; its 20,000-chunk part runs alone: `python -m bench.ingest --large`);
5. speculative decoding (bench/speculation.py, `--no-speculation` skips): ours with and without
   `--spec-type ngram-docs` and llama-server with `--spec-type ngram-simple`, side by side;
6. replicas behind nginx (bench/cluster.py, `--no-cluster` skips): ours alone, 3 replicas on
   one PostgreSQL behind nginx (consistent hash, and round-robin for contrast) against one
   server: cached share and warm TTFT, then a kill -9 of one replica. Needs nginx and
   PostgreSQL's server binaries (scripts/nginx.sh, scripts/postgres.sh); without them the part
   fails and is named at the top of the report, the other rows are still written.
A Targets table at the end lists every target of these parts, ours / llama-server.

Writes DIR/compare.md (tables), DIR/compare.png (the prefix-reuse chart) and DIR/compare.json
(raw numbers); --quick (small prompts, short generations: a smoke test) writes compare-quick.*
instead. A full run to the default DIR also puts every table into docs/benchmarks.md and the
headline table into README.md, each between its `compare:start`/`compare:end` markers
(bench/report.py; --no-docs leaves both files alone). llama-server runs when
build/llama-server/bin/llama-server exists (`make llama-server`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import (
    background,
    cluster,
    decode_churn,
    doc_qa,
    ingest,
    long_doc_qa,
    peers,
    prefix,
    speculation,
)
from bench.peers import eog_logit_bias
from bench.report import BENCHMARKS, README, chart, headline, markdown, write_between_markers
from bench.server_process import ROOT

RESULTS = ROOT / "bench" / "results"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    mem_gib = None
    try:
        info = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
        cpu = found.group(1).strip() if found else cpu
        mem = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
        mem_gib = round(int(mem.group(1)) / 2**20) if mem else None
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem_gib}


def versions() -> dict:
    from importlib.metadata import version

    try:
        rev = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    return {
        "ours": f"kvchat {rev}",
        "llama-server": f"llama-server {peers.llama_server_version() or '(not built)'}",
        "llama-cpp-python": f"llama-cpp-python {version('llama-cpp-python')} server",
    }


def run_part(report: dict, key: str, label: str, run: Callable[[], dict]) -> None:
    """Run one part after the prefix rows into report[key]; if it fails, the rows already
    measured are still written, and the failure is named at the top of the report."""
    try:
        report[key] = run()
    except Exception as e:
        report["failed"][label] = f"{type(e).__name__}: {e}"
        print(f"{label} failed: {e}", flush=True)
        traceback.print_exc()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small prompts and short generations")
    p.add_argument(
        "--servers", default=",".join(peers.NAMES), help="comma-separated, run in this order"
    )
    p.add_argument(
        "--mmproj",
        help="projector for the servers that take one (ours, llama-server): the image scenario "
        "runs on them; 'tiny' builds the tiny test projector (random weights)",
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--no-docs",
        "--no-readme",
        dest="no_docs",
        action="store_true",
        help="leave README.md and docs/benchmarks.md as they are",
    )
    p.add_argument(
        "--no-decode-churn",
        action="store_true",
        help="skip the single-stream decode and session churn rows (bench.decode_churn)",
    )
    p.add_argument(
        "--no-doc-qa", action="store_true", help="skip the document-QA rows (bench.doc_qa)"
    )
    p.add_argument(
        "--no-long-doc-qa",
        action="store_true",
        help="skip the long-document-QA rows (bench.long_doc_qa)",
    )
    p.add_argument(
        "--no-background",
        action="store_true",
        help="skip the background-work row (bench.background)",
    )
    p.add_argument(
        "--no-ingest",
        action="store_true",
        help="skip the ingestion rows per embedding backend (bench.ingest)",
    )
    p.add_argument(
        "--no-speculation",
        action="store_true",
        help="skip the speculative-decoding rows (bench.speculation)",
    )
    p.add_argument(
        "--no-cluster",
        action="store_true",
        help="skip the replicas-behind-nginx rows (bench.cluster)",
    )
    args = p.parse_args(argv)

    from app.config_derived import packaged_model_path

    model = packaged_model_path()
    mmproj = args.mmproj
    if mmproj == "tiny":
        from bench.__main__ import tiny_mmproj

        mmproj = tiny_mmproj()
    plan = prefix.QUICK if args.quick else prefix.FULL
    wanted = [s.strip() for s in args.servers.split(",") if s.strip()]
    explicit = args.servers != p.get_default("servers")
    chosen: list[peers.Peer] = []
    for name in wanted:
        try:
            chosen.append(peers.make(name, model, mmproj))
        except peers.PeerUnavailable as e:
            if explicit:
                p.error(f"{name}: {e}")
            print(f"skipping {name}: {e}", flush=True)
    bias = eog_logit_bias(model)
    report: dict = {
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "plan": plan.__dict__,
        "model": Path(model).name,
        "machine": machine(),
        "versions": versions(),
        "scenario_names": [name for name, _ in prefix.scenarios(plan, bool(mmproj))],
        "throughput_names": prefix.throughput_names(plan),
    }
    report["servers"], report["failed"] = prefix.run(chosen, plan, bias, model)
    if not any(s["scenarios"] for s in report["servers"].values()):
        print("no scenario ran", file=sys.stderr)
        return 1
    names = [peer.name for peer in chosen]
    if not args.no_decode_churn and set(names) & set(decode_churn.NAMES):
        churn = partial(decode_churn.run, model, args.quick, names, bias)
        run_part(report, "decode_churn", "decode/churn rows", churn)
    if not args.no_doc_qa and "ours" in names:
        qa = partial(doc_qa.run, model, args.quick, names)
        run_part(report, "doc_qa", "document-QA rows", qa)
    if not args.no_long_doc_qa and {"ours", "llama-server"} & set(names):
        ldqa = partial(long_doc_qa.run, model, args.quick, names)
        run_part(report, "long_doc_qa", "long-document-QA rows", ldqa)
    if not args.no_background and "ours" in names:
        bg = partial(background.run, model, args.quick)
        run_part(report, "background", "background-work row", bg)
    if not args.no_ingest and "ours" in names:
        ing = partial(ingest.run, model, args.quick)
        run_part(report, "ingest", "ingestion rows", ing)
    if not args.no_speculation and {"ours", "llama-server"} <= set(names):
        spec = partial(speculation.run, model, args.quick)
        run_part(report, "speculation", "speculative-decoding rows", spec)
    if not args.no_cluster and "ours" in names:
        replicas = partial(cluster.run, model, args.quick)
        run_part(report, "cluster", "replicas-behind-nginx rows", replicas)

    args.out.mkdir(parents=True, exist_ok=True)
    stem = "compare-quick" if args.quick else "compare"
    table = markdown(report)
    md = args.out / f"{stem}.md"
    md.write_text(f"# Comparison: {', '.join(report['servers'])}\n\n{table}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    chart(report, args.out / f"{stem}.png")
    print("\n" + table)
    print(f"wrote {md}, {args.out / (stem + '.png')}, {args.out / (stem + '.json')}")
    if args.out == RESULTS and not args.quick and not args.no_docs:
        chart_link = f"\n![warm/cold TTFT per scenario](../bench/results/{stem}.png)\n"
        for path, block in ((BENCHMARKS, table + chart_link), (README, headline(report))):
            if write_between_markers(path, block):
                print(f"updated the tables in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
