"""`python -m bench.compare` (`make bench`): every benchmark row, ours beside the other servers.

    python -m bench.compare [--quick] [--servers ours,llama-server,llama-cpp-python]
                            [--mmproj PATH|tiny] [--out DIR] [--no-docs] [--model GGUF]
                            [--llama-server BIN] [--server-args ARGS] [--ours-args ARGS]
                            [--threads N] [--parallel N] [--ctx-size N] [--more-clients N,..]
                            [--no-decode-churn] [--no-doc-qa] [--no-long-doc-qa] [--no-background]
                            [--no-ingest] [--no-speculation] [--no-cluster]

One run holds every comparison of the project, so one table answers "where do we stand", and
a change that helps one row and hurts another shows both:
1. prefix reuse (bench/workloads/prefix.py): every server up at once (bench/lib/peers.py: same
model file, 2
   threads, 8192 context, 4 slots), taking turns through every scenario in bench/lib/core.py, then
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
(bench/lib/report.py; --no-docs leaves both files alone). llama-server runs when
build/llama-server/bin/llama-server exists (`make llama-server`). The flags after --model set
every server of the run (bench/lib/peers.py `Profile`): the GPU check (bench/gpu/check.py) runs
this on a GPU with `-ngl 999 -fa on` for both servers.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import background, cluster, decode_churn, doc_qa, ingest, long_doc_qa, speculation
from bench.lib import peers
from bench.lib.peers import eog_logit_bias
from bench.lib.report import BENCHMARKS, README, chart, headline, markdown, write_between_markers
from bench.lib.server_process import ROOT
from bench.workloads import prefix

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
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem_gib, "gpu": gpu()}


def gpu() -> str | None:
    """The GPUs nvidia-smi lists (name, memory, driver), or None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    query = "--query-gpu=name,memory.total,driver_version"
    try:
        out = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True
        )
    except OSError:
        return None
    return "; ".join(ln.strip() for ln in out.stdout.splitlines() if ln.strip()) or None


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


def profile_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("every server of the run (default: this machine's CPU figures)")
    g.add_argument("--model", help="GGUF for every server (default: the packaged model)")
    g.add_argument("--llama-server", type=Path, help="llama-server binary")
    g.add_argument("--server-args", default="", help="flags for ours and llama-server alike")
    g.add_argument("--ours-args", default="", help="flags for ours alone")
    g.add_argument("--threads", type=int, default=peers.THREADS)
    g.add_argument("--parallel", type=int, default=peers.SLOTS, help="slots (-np)")
    g.add_argument("--ctx-size", type=int, default=peers.CTX_SIZE)
    g.add_argument("--more-clients", help="further aggregate decode rows, e.g. 32")


def configure_profile(args: argparse.Namespace) -> peers.Profile:
    return peers.configure(
        threads=args.threads,
        slots=args.parallel,
        ctx_size=args.ctx_size,
        common_args=tuple(shlex.split(args.server_args)),
        ours_args=tuple(shlex.split(args.ours_args)),
        llama_server=args.llama_server or peers.LLAMA_SERVER,
    )


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
    profile_flags(p)
    args = p.parse_args(argv)
    profile = configure_profile(args)

    from app.config_derived import packaged_model_path

    model = args.model or packaged_model_path()
    mmproj = args.mmproj
    if mmproj == "tiny":
        from bench.__main__ import tiny_mmproj

        mmproj = tiny_mmproj()
    plan = prefix.QUICK if args.quick else prefix.FULL
    if args.more_clients:
        more = tuple(int(n) for n in args.more_clients.split(","))
        plan = dataclasses.replace(plan, more_clients=more)
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
        "profile": {"common_args": list(profile.common_args), "slots": profile.slots},
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
