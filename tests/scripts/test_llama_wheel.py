"""scripts/llama_wheel.py: the wheel cache is keyed by what a build holds, and a wheel is handed out
only after its CPU backend loaded here in a child process; a cached one that does not run is
rebuilt. The compile itself is not run: `build` is replaced where a test would need one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mm.ggml_backends import cpu_variants, library_dir
from tests.server import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import llama_wheel  # noqa: E402  (scripts/ is not a package)

ARGS = "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_VARIANTS=x64,haswell -DLLAMA_CURL=OFF"
WHEEL = "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"


def wheel_of(folder: Path, keep=lambda name: True) -> Path:  # noqa: ANN001
    """A wheel holding the installed llama_cpp/lib's files that `keep` accepts."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / WHEEL
    with zipfile.ZipFile(out, "w") as z:
        for f in sorted(library_dir().iterdir()):
            if f.is_file() and keep(f.name):
                z.write(f, f"llama_cpp/lib/{f.name}")
    return out


def test_the_key_names_version_backend_platform_and_flags() -> None:
    key = llama_wheel.make_key("0.3.36", "cpu", ARGS)
    assert key.cpu is None  # GGML_NATIVE=OFF: not tied to this CPU
    assert key.folder.startswith("0.3.36-cpu-") and key.folder.endswith(key.digest)
    assert key.variants == "x64 haswell"
    others = [
        llama_wheel.make_key("0.3.37", "cpu", ARGS),
        llama_wheel.make_key("0.3.36", "cuda", ARGS),
        llama_wheel.make_key("0.3.36", "cpu", ARGS.replace("x64,haswell", "haswell")),
    ]
    assert len({key.folder, *(k.folder for k in others)}) == 4


def test_a_native_build_is_keyed_by_the_cpu_it_was_made_for(monkeypatch) -> None:  # noqa: ANN001
    native = llama_wheel.make_key("0.3.36", "cpu", "-DLLAMA_CURL=OFF")
    assert native.cpu == llama_wheel.cpu_identity() and native.cpu
    monkeypatch.setattr(llama_wheel, "cpu_identity", lambda: "another CPU | avx2")
    assert llama_wheel.make_key("0.3.36", "cpu", "-DLLAMA_CURL=OFF").folder != native.folder


def test_the_installed_build_runs_here(tmp_path: Path) -> None:
    ok, said = llama_wheel.runs_here(wheel_of(tmp_path))
    assert ok and said.startswith("CPU variant "), said


@pytest.mark.skipif(not cpu_variants(library_dir()), reason="a build without CPU variants")
def test_a_wheel_without_a_cpu_backend_does_not_run(tmp_path: Path) -> None:
    ok, said = llama_wheel.runs_here(wheel_of(tmp_path, lambda n: "cpu" not in n))
    assert not ok and "no CPU backend" in said


@pytest.mark.skipif(not shutil.which("qemu-x86_64") or not shutil.which("cc"), reason="qemu, cc")
def test_a_wheel_that_dies_with_sigill_on_this_cpu_does_not_run(tmp_path: Path) -> None:
    # A libggml whose loading executes an AVX-512 instruction, as the AVX-512 build's did,
    # checked on an emulated CPU without AVX-512.
    source = tmp_path / "avx512.c"
    source.write_text(
        "__attribute__((constructor)) static void init(void)"
        ' { __asm__ volatile("vpxord %zmm0, %zmm0, %zmm0"); }\n'
    )
    lib = tmp_path / "lib"
    lib.mkdir()
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(lib / "libggml.so"), str(source)], check=True
    )
    wheel = tmp_path / WHEEL
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(lib / "libggml.so", "llama_cpp/lib/libggml.so")
    ok, said = llama_wheel.runs_here(wheel, ("qemu-x86_64", "-cpu", "EPYC-Rome"))
    assert not ok and said.startswith("died with signal 4"), said


@pytest.mark.skipif(not cpu_variants(library_dir()), reason="a build without CPU variants")
def test_a_cached_wheel_is_reused_and_one_that_does_not_run_is_rebuilt(
    tmp_path: Path,
    monkeypatch,
    capsys,  # noqa: ANN001
) -> None:
    key = llama_wheel.make_key("0.3.36", "cpu", ARGS)
    folder = tmp_path / "wheels" / key.folder
    built: list[Path] = []

    def build(key_, folder_: Path, python: str) -> Path:  # stands in for the compile
        built.append(folder_)
        (folder_ / WHEEL).unlink()
        (folder_ / "build.json").write_text('{"build_time": "0 min 1 s"}')
        return wheel_of(folder_)

    monkeypatch.setattr(llama_wheel, "build", build)
    argv = ["--wheels", str(tmp_path / "wheels"), "--version", "0.3.36", "--cmake-args", ARGS]

    wheel_of(folder, lambda n: "cpu" not in n)  # cached, but no CPU backend runs
    assert llama_wheel.main(argv) == 0
    out = capsys.readouterr()
    assert built == [folder] and out.out.strip() == str(folder / WHEEL)
    assert "does not run on this CPU" in out.err and "built llama-cpp-python" in out.err

    assert llama_wheel.main(argv) == 0  # now it runs: reused, nothing built
    out = capsys.readouterr()
    assert built == [folder] and out.out.strip() == str(folder / WHEEL)
    assert "reused llama-cpp-python 0.3.36 (cpu; CPU variants: x64 haswell)" in out.err
