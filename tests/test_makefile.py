"""The Makefile's llama.cpp build flags per platform: the CPU variants on x86-64 only; aarch64 and
macOS get llama.cpp's defaults (no x86 flag reaches their compiler). Read with `make -n`: nothing
is built."""

from __future__ import annotations

import subprocess

import pytest

from tests.server import ROOT


def make(*args: str) -> str:
    return subprocess.run(
        ["make", "-s", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def wheel_recipe(machine: str) -> str:
    """What `make` would run to get the wheel on a machine whose `uname -m` is `machine`."""
    recipe = make("-n", "-B", f"UNAME_M={machine}", "build/llama-wheel-cpu.txt")
    lines = recipe.replace("\\\n", " ").splitlines()
    return next(line for line in lines if "llama_wheel.py" in line)


def test_x86_64_builds_the_cpu_variants_for_run_time_dispatch() -> None:
    args = make("UNAME_M=x86_64", "cpu-args").split()
    assert "-DGGML_BACKEND_DL=ON" in args and "-DGGML_CPU_ALL_VARIANTS=ON" in args
    assert "-DGGML_NATIVE=OFF" in args
    variants = next(a for a in args if a.startswith("-DGGML_CPU_VARIANTS=")).split("=")[1]
    assert variants.split(",")[:2] == ["x64", "haswell"]
    assert not any(a.startswith(("-DGGML_AVX", "-DGGML_AMX")) for a in args)
    assert "-DGGML_CPU_VARIANTS=" in wheel_recipe("x86_64")


@pytest.mark.parametrize("machine", ["aarch64", "arm64"])
def test_other_platforms_get_llama_cpp_defaults(machine: str) -> None:
    assert make(f"UNAME_M={machine}", "cpu-args").strip() == ""
    recipe = wheel_recipe(machine)
    assert '--cmake-args " -DLLAMA_CURL=OFF"' in recipe
    assert "GGML" not in recipe
