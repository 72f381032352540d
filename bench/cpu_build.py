"""`python -m bench.cpu_build`: the one build for every CPU against a build for this machine only.

    python -m bench.cpu_build [--native LIB_DIR] [--runs 3] [--out bench/results/cpu-build.md]

Both are llama-cpp-python's libraries from the same source: the installed wheel (the CPU
variants, the best one loaded at start: mm/ggml_backends.py) and a build with `GGML_NATIVE=ON`
(`-march=native`, one CPU backend), which scripts/build_llama_wheel.sh makes into
build/cpu-native on first use (~3 min) unless `--native` names its library folder. Our server
runs on each in turn, alone on the machine (`LLAMA_CPP_LIB_PATH` picks the libraries), `-np 1
-t 2`, `--runs` times, alternating. Each start measures, from the server's own timings:
- prefill: three prompts of 1,000 tokens (random words, sent as token ids), nothing cached, one
  token generated: prompt tokens/s (the median of the three);
- decode: three times 128 tokens, greedy, from a short prompt, past end-of-generation: tokens/s.
The builds take turns in ABBA order, so a drift of the machine's speed cancels.
Printed and written (`--out`): a row per run and build, then the medians and their ratio.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.lib import peers
from bench.lib.server_process import ROOT

NATIVE = ROOT / "build" / "cpu-native"
PROMPT_TOKENS = 1000
DECODE_TOKENS = 128


@dataclass(slots=True)
class Row:
    build: str
    variant: str
    prefill_tps: float  # median of the start's three prompts
    decode_tps: float


def native_libs() -> Path:
    """build/cpu-native/llama_cpp/lib: a GGML_NATIVE=ON wheel's libraries, built once."""
    lib = NATIVE / "llama_cpp" / "lib"
    if lib.exists():
        return lib
    wheels = NATIVE / "wheel"
    subprocess.run(
        [str(ROOT / "scripts" / "build_llama_wheel.sh"), str(wheels)],
        env={
            **os.environ,
            "LLAMA_CMAKE_ARGS": "-DGGML_NATIVE=ON -DLLAMA_CURL=OFF",
            "PYTHON": sys.executable,
        },
        check=True,
    )
    with zipfile.ZipFile(next(wheels.glob("llama_cpp_python-*.whl"))) as z:
        z.extractall(NATIVE, [n for n in z.namelist() if n.startswith("llama_cpp/lib/")])
    return lib


def prompts(base_url: str, n: int, seed: int) -> list[list[int]]:
    """`n` prompts of PROMPT_TOKENS token ids, from random words (another set per seed)."""
    rng = random.Random(seed)
    words = ["river", "stone", "harbour", "lantern", "meadow", "copper", "orbit", "violet"]
    words += ["quarry", "glacier", "saddle", "pepper", "marble", "cinder", "falcon", "ribbon"]
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(words) + str(rng.randrange(100)) for _ in range(700))
        ids = httpx.post(base_url + "/tokenize", json={"content": text}, timeout=60).json()
        out.append(ids["tokens"][:PROMPT_TOKENS])
    return out


def measure(build: str, env: dict[str, str], seed: int) -> Row:
    from app.config_derived import packaged_model_path

    with peers.ours(packaged_model_path(), slots=1, env=env) as peer:
        url = peer.base_url
        variant = httpx.get(url + "/props", timeout=10).json()["compute"]["cpu_variant"]
        rates = []
        for ids in prompts(url, 3, seed):
            body = {"prompt": ids, "n_predict": 1, "cache_prompt": False, "temperature": 0}
            timings = httpx.post(url + "/completion", json=body, timeout=300).json()["timings"]
            rates.append(timings["prompt_per_second"])
        body = {
            "prompt": "Once upon a time, in a quiet village by the sea,",
            "n_predict": DECODE_TOKENS,
            "ignore_eos": True,
            "temperature": 0,
            "cache_prompt": False,
        }
        decode = []
        for _ in range(3):
            timings = httpx.post(url + "/completion", json=body, timeout=300).json()["timings"]
            decode.append(timings["predicted_per_second"])
    return Row(build, variant, statistics.median(rates), statistics.median(decode))


def table(rows: list[Row]) -> list[str]:
    lines = ["| run | build | CPU variant | prefill, tokens/s | decode, tokens/s |"]
    lines.append("|---:|---|---|---:|---:|")
    for i, r in enumerate(rows):
        rates = f"{r.prefill_tps:.0f} | {r.decode_tps:.1f}"
        lines.append(f"| {i // 2 + 1} | {r.build} | {r.variant} | {rates} |")
    med = {
        build: (
            statistics.median(r.prefill_tps for r in rows if r.build == build),
            statistics.median(r.decode_tps for r in rows if r.build == build),
        )
        for build in ("dispatch", "native")
    }
    (dp, dd), (np_, nd) = med["dispatch"], med["native"]
    lines += [
        "",
        "| median | prefill of 1,000 tokens, tokens/s | decode, tokens/s |",
        "|---|---:|---:|",
        f"| every-CPU build (dispatch) | {dp:.0f} | {dd:.1f} |",
        f"| this machine only (native) | {np_:.0f} | {nd:.1f} |",
        f"| **dispatch / native** | **{dp / np_:.3f}** | **{dd / nd:.3f}** |",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    summary = __doc__.split("\n")[0]
    p = argparse.ArgumentParser(prog="python -m bench.cpu_build", description=summary)
    p.add_argument("--native", type=Path, help="a GGML_NATIVE=ON build's llama_cpp/lib folder")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path, help="write the tables here (markdown)")
    args = p.parse_args(argv)
    native = args.native or native_libs()
    env = {"LLAMA_CPP_LIB_PATH": str(native), "MTMD_CPP_LIB": str(native)}
    rows: list[Row] = []
    builds = [("dispatch", {}), ("native", env)]
    for run in range(args.runs):
        for build, extra in builds if run % 2 == 0 else builds[::-1]:  # ABBA: drift cancels
            rows.append(measure(build, extra, seed=run))
            print(rows[-1], flush=True)
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")), "?")
    lines = [f"CPU: {cpu}; our server, `-np 1 -t 2`, each build alone, {args.runs} runs", ""]
    lines += table(rows)
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
