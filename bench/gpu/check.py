"""The GPU check's benchmark: every row of `bench.compare`, ours then llama-server with the same
flags, per model; one table.

    python -m bench.gpu.check --llama-server BIN --models NAME=GGUF[,NAME=GGUF]
                              [--server-args "-ngl 999 -fa on"] [--ours-args ARGS]
                              [--threads 8] [--parallel 32] [--ctx-size 65536]
                              [--more-clients 32] [--rehearsal] [--servers ours] --out DIR

scripts/gpu_check.sh runs it on the GPU machine after building llama.cpp and making the models.
Per model it runs bench.compare's prefix-reuse scenarios (warm TTFT), aggregate decode at 1, 8
and `--more-clients` clients, single-stream decode and session churn, document QA (prefix and
blend) and speculation on quoting answers, the two servers alternating and each row repeated as
bench.compare does; the parts that need nginx, PostgreSQL or ingestion speed stay on the CPU
bench. `--rehearsal` runs bench.compare's --quick plans (the CPU rehearsal in `make test`).

Writes DIR/gpu-check.md (the card, the flags and, per model, the headline table: ours,
llama-server, the ratio and its target) and DIR/gpu-check.json (every part's raw figures), and
prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import compare
from bench.report import headline

# What the GPU check leaves to the CPU bench: no nginx or PostgreSQL there, and ingestion and
# background pacing are about the CPU the embedder shares with the engine.
SKIPPED = ("--no-background", "--no-ingest", "--no-cluster")


def models(spec: str) -> dict[str, str]:
    """NAME=GGUF[,NAME=GGUF] -> {name: path}."""
    out = {}
    for item in spec.split(","):
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise argparse.ArgumentTypeError(f"{item!r}: expected NAME=GGUF")
        out[name.strip()] = path.strip()
    return out


def compare_args(args: argparse.Namespace, model: str, out: Path) -> list[str]:
    argv = ["--servers", args.servers, "--out", str(out), "--no-docs", *SKIPPED]
    argv += ["--model", model, "--llama-server", str(args.llama_server)]
    argv += ["--server-args", args.server_args, "--ours-args", args.ours_args]
    argv += ["--threads", str(args.threads), "--parallel", str(args.parallel)]
    argv += ["--ctx-size", str(args.ctx_size)]
    if args.more_clients:
        argv += ["--more-clients", args.more_clients]
    if args.rehearsal:
        argv.append("--quick")
    return argv


def run(args: argparse.Namespace) -> tuple[str, dict]:
    """(markdown, raw): every model's headline table and its full report."""
    raw: dict = {"flags": vars(args) | {"llama_server": str(args.llama_server)}, "models": {}}
    sections = []
    for name, path in args.models.items():
        out = args.out / name
        print(f"\n=== {name}: {path}", flush=True)
        status = compare.main(compare_args(args, path, out))
        stem = "compare-quick" if args.rehearsal else "compare"
        report_path = out / f"{stem}.json"
        if status != 0 or not report_path.exists():
            sections.append(f"## {name}\n\nbench.compare exited with {status}: no table.\n")
            raw["models"][name] = {"status": status}
            continue
        report = json.loads(report_path.read_text())
        raw["models"][name] = report
        flags = " ".join([args.server_args, f"-np {args.parallel} -c {args.ctx_size}"]).strip()
        sections.append(f"## {name}\n\nFlags of both servers: `{flags}`.\n\n{headline(report)}\n")
    gpu = compare.gpu() or "no GPU (a CPU rehearsal)"
    return f"# GPU check: {gpu}\n\n" + "\n".join(sections), raw


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.gpu.check", description=__doc__.split("\n")[0]
    )
    p.add_argument("--llama-server", type=Path, required=True)
    p.add_argument("--models", type=models, required=True, help="NAME=GGUF[,NAME=GGUF]")
    p.add_argument("--server-args", default="-ngl 999 -fa on")
    p.add_argument("--ours-args", default="")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--parallel", type=int, default=32)
    p.add_argument("--ctx-size", type=int, default=65536)
    p.add_argument("--more-clients", default="32")
    p.add_argument("--rehearsal", action="store_true", help="bench.compare's --quick plans")
    p.add_argument("--servers", default="ours,llama-server", help="ours alone: no llama-server")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    table, raw = run(args)
    (args.out / "gpu-check.md").write_text(table)
    (args.out / "gpu-check.json").write_text(json.dumps(raw, indent=1, default=str))
    print("\n" + table, flush=True)
    ran = [r for r in raw["models"].values() if r.get("servers")]
    return 0 if len(ran) == len(args.models) else 1


if __name__ == "__main__":
    sys.exit(main())
