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
bench. `--rehearsal` runs bench.compare's --quick plans without speculation (the CPU rehearsal
in `make test`).

Writes DIR/gpu-check.md (the card, the flags and, per model, the headline table: ours,
llama-server, the ratio and its target) and DIR/gpu-check.json (every part's raw figures) after
each model, and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import compare
from bench.lib.report import headline

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
    if args.rehearsal:  # the kit and the script are rehearsed, not every part of the bench
        argv += ["--quick", "--no-speculation"]
    return argv


def run(args: argparse.Namespace) -> dict:
    """Every model in turn; after each, DIR/gpu-check.md and .json hold what has run (a call
    cut short by its time limit keeps the models that finished)."""
    raw: dict = {"flags": vars(args) | {"llama_server": str(args.llama_server)}, "models": {}}
    sections: list[str] = []
    gpu = compare.gpu() or "no GPU (a CPU rehearsal)"
    for name, path in args.models.items():
        print(f"\n=== {name}: {path}", flush=True)
        report = run_model(args, path, args.out / name)
        raw["models"][name] = report
        sections.append(section(args, name, report))
        table = f"# GPU check: {gpu}\n\n" + "\n".join(sections)
        (args.out / "gpu-check.md").write_text(table)
        (args.out / "gpu-check.json").write_text(json.dumps(raw, indent=1, default=str))
        print("\n" + table, flush=True)
    return raw


def run_model(args: argparse.Namespace, model: str, out: Path) -> dict:
    """bench.compare's report for one model, or {"status": its exit status} without one."""
    status = compare.main(compare_args(args, model, out))
    path = out / ("compare-quick.json" if args.rehearsal else "compare.json")
    if status != 0 or not path.exists():
        return {"status": status}
    return json.loads(path.read_text())


def section(args: argparse.Namespace, name: str, report: dict) -> str:
    if "servers" not in report:
        return f"## {name}\n\nbench.compare exited with {report['status']}: no table.\n"
    flags = " ".join([args.server_args, f"-np {args.parallel} -c {args.ctx_size}"]).strip()
    return f"## {name}\n\nFlags of both servers: `{flags}`.\n\n{headline(report)}\n"


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
    p.add_argument("--rehearsal", action="store_true", help="--quick plans, no speculation")
    p.add_argument("--servers", default="ours,llama-server", help="ours alone: no llama-server")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    raw = run(args)
    ran = [r for r in raw["models"].values() if r.get("servers")]
    return 0 if len(ran) == len(args.models) else 1


if __name__ == "__main__":
    sys.exit(main())
