"""`make gpu-kit` and its rehearsal: the kit stays under the GPU call's carry limit, holds what
the GPU machine lacks, and scripts/gpu_check.sh runs through on this machine's CPU against a
tiny random model (the kit works the first time a GPU machine is there)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tarfile
from pathlib import Path

import pytest

from bench.gpu import kit
from bench.lib.peers import LLAMA_SERVER
from bench.lib.server_process import ROOT

pytestmark = pytest.mark.slow  # make test-fast leaves it out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "kit"
    assert kit.main(["--out", str(out)]) == 0
    return out


def test_the_kit_is_under_the_limit(built: Path) -> None:
    manifest = json.loads((built / "MANIFEST.json").read_text())
    # The CUDA build's CPU part follows the Makefile's: the CPU variants, loaded at run time.
    assert manifest["cpu_cmake_args"] == kit.cpu_cmake_args()
    if platform.machine() == "x86_64":
        assert "-DGGML_BACKEND_DL=ON" in manifest["cpu_cmake_args"].split()
    assert kit.folder_bytes(built) <= kit.LIMIT_BYTES
    assert manifest["bytes"] <= kit.LIMIT_BYTES


def test_the_kit_holds_what_the_gpu_machine_lacks(built: Path) -> None:
    wheels = {w.name.split("-")[0].lower() for w in (built / "wheels").glob("*.whl")}
    assert {n.replace("-", "_") for n in kit.WHEELS} == wheels
    with tarfile.open(built / "llama.cpp.tar.xz") as tar:
        names = set(tar.getnames())
    assert "llama.cpp/CMakeLists.txt" in names
    assert any(n.startswith("llama.cpp/ggml/src/ggml-cuda/") for n in names)
    assert any(n.startswith("llama.cpp/tools/server/") for n in names)
    assert not any(
        n.startswith(("llama.cpp/models/", "llama.cpp/ggml/src/ggml-vulkan/")) for n in names
    )
    with tarfile.open(built / "llama_cpp.tar.xz") as tar:
        names = set(tar.getnames())
    assert "llama_cpp/llama_cpp.py" in names
    assert not any(n.startswith("llama_cpp/lib/") for n in names)  # the CUDA build's instead
    assert (built / "models" / "smollm2-metadata.gguf").exists()
    assert (built / "models" / "minilm" / "tokenizer.json").exists()
    assert not list((built / "models").rglob("*.safetensors"))


def test_the_rehearsal_runs_the_check_on_the_cpu(built: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with_llama_server = LLAMA_SERVER.exists()  # the script looks once, before the rows
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_CPP", "MTMD"))}
    run = subprocess.run(
        ["scripts/gpu_check.sh", "--rehearsal", "--kit", str(built), "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["build.log", "gpu-check.json", "gpu-check.md", "logs.tar.xz", "steps.log"]
    )
    table = (out / "gpu-check.md").read_text()
    assert "## tiny" in table and "warm TTFT: same long prompt twice" in table
    raw = json.loads((out / "gpu-check.json").read_text())
    report = raw["models"]["tiny"]
    ours = report["servers"]["ours"]
    assert ours["scenarios"] and not ours["errors"]
    assert set(report["throughput_names"]) <= set(ours["throughput"])
    assert report["decode_churn"] and report["doc_qa"]
    if with_llama_server:
        assert report["servers"]["llama-server"]["scenarios"]
    # The kit's llama_cpp package (no libraries of its own) was the one loaded.
    steps = (out / "steps.log").read_text()
    assert "llama_cpp: /tmp/kvchat-gpu-" in steps and "done (status 0)" in steps
