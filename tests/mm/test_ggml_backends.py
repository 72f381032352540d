"""mm.ggml_backends on the installed llama-cpp-python: each CPU variant's module carries only the
instructions of its level, and every library meant for any CPU none beyond x86-64's baseline; the
best variant this CPU runs is the one loaded; a variant named is loaded, or refused with the
reason. Backends load once per process, so each load here runs in a child process."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mm.ggml_backends import cpu_variants, library_dir

ROOT = Path(__file__).resolve().parents[2]
X86 = platform.machine() in ("x86_64", "AMD64")

# What each of llama.cpp's x86 variants may contain: 0 legacy SSE only, 1 VEX (AVX, AVX2, FMA,
# F16C, BMI2), 2 EVEX too (AVX-512), 3 AMX too. A library that is no variant must run anywhere.
LEVELS = {
    "x64": 0,
    "sse42": 0,
    "sandybridge": 1,
    "ivybridge": 1,
    "piledriver": 1,
    "haswell": 1,
    "alderlake": 1,
    "skylakex": 2,
    "cannonlake": 2,
    "cascadelake": 2,
    "icelake": 2,
    "cooperlake": 2,
    "zen4": 2,
    "sapphirerapids": 3,
}
# Prefixes that may stand before a VEX (c4, c5) or EVEX (62) byte in 64-bit mode, where those
# bytes begin nothing else.
_PREFIXES = {"26", "2e", "36", "3e", "64", "65", "67", "f0"}


def encodings(lib: Path) -> Counter[str]:
    """How many instructions of `lib` are VEX, EVEX and AMX encoded (objdump, raw bytes)."""
    out = subprocess.run(
        ["objdump", "-d", "--insn-width=15", str(lib)], capture_output=True, text=True, check=True
    ).stdout
    counts: Counter[str] = Counter()
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[2].strip():
            continue
        raw = [b for b in parts[1].split() if b not in _PREFIXES]
        first = raw[0] if raw else ""
        counts["any"] += 1
        counts["evex"] += first == "62"
        counts["vex"] += first in ("c4", "c5")
        counts["amx"] += parts[2].split()[0].startswith(("tile", "tdpb", "ldtilecfg"))
    return counts


def level(counts: Counter[str]) -> int:
    return 3 if counts["amx"] else 2 if counts["evex"] else 1 if counts["vex"] else 0


def load_in_child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mm.ggml_backends", str(library_dir()), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


needs_x86 = pytest.mark.skipif(
    not X86 or not shutil.which("objdump"), reason="x86-64 builds with objdump"
)


@needs_x86
def test_the_wheel_has_cpu_variants_from_baseline_to_avx512() -> None:
    built = cpu_variants(library_dir())
    assert {"x64", "haswell"} <= set(built)
    assert any(LEVELS[v] == 2 for v in built)
    assert "sapphirerapids" not in built  # AMX kernels crashed inside llama_decode


@needs_x86
@pytest.mark.parametrize("variant", ["x64", "haswell", "skylakex", "zen4"])
def test_a_variant_carries_no_instruction_beyond_its_level(variant: str) -> None:
    lib = library_dir() / f"libggml-cpu-{variant}.so"
    if not lib.exists():
        pytest.skip(f"{variant} is not built")
    counts = encodings(lib)
    assert counts["any"] > 10_000
    assert level(counts) <= LEVELS[variant], counts
    if LEVELS[variant] >= 1:  # the level is really there: the flags reached the compiler
        assert level(counts) == LEVELS[variant], counts


@needs_x86
def test_libraries_for_every_cpu_use_only_the_x86_64_baseline() -> None:
    folder = library_dir()
    shared = ["libggml-base.so", "libggml.so", "libllama.so", "libmtmd.so", "libggml-cpu.so"]
    checked = [name for name in shared if (folder / name).exists()]
    assert "libllama.so" in checked and "libggml-base.so" in checked
    # A single CPU backend (no variants) must run on every CPU as well.
    for name in checked:
        counts = encodings(folder / name)
        assert level(counts) == 0, (name, counts)


def features(line: str) -> list[str]:
    """The features of `CPU variant NAME (A B C); ...`."""
    return line.split("(", 1)[1].split(")", 1)[0].split()


def test_the_best_variant_this_cpu_runs_is_loaded() -> None:
    built = cpu_variants(library_dir())
    loaded = load_in_child()
    assert loaded.returncode == 0, loaded.stderr
    if not built:  # a build without GGML_BACKEND_DL (aarch64, macOS)
        assert loaded.stdout.startswith("CPU variant builtin")
        return
    # ggml scores a variant by the features it was built with, 0 where one is missing here.
    runs = {}
    for variant in built:
        child = load_in_child(variant)
        if child.returncode == 0:
            runs[variant] = len(features(child.stdout))
        else:
            assert "cannot run on this CPU" in child.stderr, child.stderr
    assert runs, "no CPU variant runs on this CPU"
    assert loaded.stdout.startswith(f"CPU variant {max(runs, key=runs.__getitem__)} (")


@needs_x86
def test_a_named_variant_is_loaded_and_reports_its_features() -> None:
    done = load_in_child("haswell")
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("CPU variant haswell (")
    assert "AVX2" in line.split() and "AVX512" not in line


def test_an_unknown_variant_is_refused_with_the_ones_built() -> None:
    done = load_in_child("pentium4")
    assert done.returncode == 1
    assert "pentium4" in done.stderr
    assert ("built:" in done.stderr) or ("no CPU variants" in done.stderr)


# --- on an emulated CPU --------------------------------------------------------------------------
# qemu's user mode runs the whole process on a CPU model of its own: the CPUID the variants score
# against and the instructions it executes are that model's, so an AVX-512 instruction stops it
# with SIGILL as on the real CPU. EPYC-Rome (AMD Zen 2) has AVX2, FMA and F16C and no AVX-512:
# the machines where the earlier AVX-512 build died. Nehalem has SSE4.2 and no AVX (numpy, which
# llama_cpp imports, needs no less). The same instructions emulated give the same floats, so the
# tokens equal the variant's own run on this CPU exactly.
QEMU = shutil.which("qemu-x86_64")
GENERATE = """
import ctypes, json, sys
import llama_cpp
from mm.ggml_backends import load_backends

quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)
llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
backends = load_backends(sys.argv[2])
llama_cpp.llama_backend_init()
mparams = llama_cpp.llama_model_default_params()
model = llama_cpp.llama_model_load_from_file(sys.argv[1].encode(), mparams)
params = llama_cpp.llama_context_default_params()
params.n_ctx, params.n_batch, params.n_threads, params.n_threads_batch = 256, 64, 1, 1
ctx = llama_cpp.llama_init_from_model(model, params)
text = b"The three longest rivers of Europe are"
ids = (llama_cpp.llama_token * 64)()
vocab = llama_cpp.llama_model_get_vocab(model)
n = llama_cpp.llama_tokenize(vocab, text, len(text), ids, 64, True, False)
greedy = llama_cpp.llama_sampler_init_greedy()
batch, tokens = llama_cpp.llama_batch_get_one(ids, n), []
for _ in range(8):
    assert llama_cpp.llama_decode(ctx, batch) == 0
    tokens.append(llama_cpp.llama_sampler_sample(greedy, ctx, -1))
    batch = llama_cpp.llama_batch_get_one((llama_cpp.llama_token * 1)(tokens[-1]), 1)
print(json.dumps({"variant": backends.cpu_variant, "tokens": tokens}))
"""


def generate(model_path: str, variant: str, qemu_cpu: str | None = None) -> dict:
    prefix = [QEMU, "-cpu", qemu_cpu] if qemu_cpu else []
    done = subprocess.run(
        [*prefix, sys.executable, "-c", GENERATE, model_path, variant],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not X86 or not QEMU, reason="x86-64 with qemu-user (scripts/qemu.sh)")
@pytest.mark.parametrize(("qemu_cpu", "variant"), [("EPYC-Rome", "haswell"), ("Nehalem", "x64")])
def test_on_an_older_cpu_its_variant_is_loaded_and_generates(
    model_path: str, qemu_cpu: str, variant: str
) -> None:
    emulated = generate(model_path, "auto", qemu_cpu)
    assert emulated["variant"] == variant
    assert emulated["tokens"] == generate(model_path, variant)["tokens"]
