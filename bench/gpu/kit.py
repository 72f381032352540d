"""`make gpu-kit`: one folder with everything the GPU machine lacks, under its carry limit.

    python -m bench.gpu.kit [--out build/gpu-kit]

The GPU machine has Python 3.12, torch, transformers, sentence-transformers, numpy, jinja2, httpx
and a CUDA toolkit, no network, and takes at most 64 MiB of files per call (the work tree
included). The kit holds:
- `llama.cpp.tar.xz`: the llama.cpp that llama-cpp-python vendors, without what a CUDA build of
  the libraries and llama-server never reads (models, docs, tests, examples, the web UI, other
  GPU backends);
- `llama_cpp.tar.xz`: llama-cpp-python's Python package without its compiled libraries: it
  loads the CUDA build's through `LLAMA_CPP_LIB_PATH` and `MTMD_CPP_LIB`;
- `wheels/`: our runtime dependencies that the machine does not have, cp312 manylinux wheels at
  the versions this venv runs;
- `models/`: the packaged LLM's metadata (architecture, tokenizer) as a GGUF without tensors,
  and the embedding model's configuration and tokenizer without its weights
  (bench/gpu/random_model.py gives both random weights there);
- `MANIFEST.json`: versions, files and sizes, and the CPU build flags (`cpu_cmake_args`, the
  Makefile's: the CPU variants), so the CUDA build's CPU part runs on any x86-64 CPU as ours does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

from bench.lib.server_process import ROOT

LLAMA_VERSION = "0.3.36"
LIMIT_BYTES = 56 * 2**20  # the call's 64 MiB less room for the work tree
OUT = ROOT / "build" / "gpu-kit"

# Runtime dependencies the GPU machine lacks (its package list: .library's device KINDS.md).
# pypdfium2 and python-docx are imported only for PDF and DOCX uploads, psycopg only for
# PostgreSQL: the check needs none of them.
WHEELS = (
    "fastapi",
    "starlette",
    "pydantic",
    "pydantic-core",
    "pydantic-settings",
    "python-dotenv",
    "annotated-types",
    "typing-inspection",
    "uvicorn",
    "python-multipart",
    "sqlalchemy",
    "greenlet",
    "alembic",
    "mako",
    "gguf",
    "faiss-cpu",
    "bm25s",
    "semantic-text-splitter",
    "diskcache",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64")
PLATFORMS += ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")

# Parts of vendor/llama.cpp a CUDA build of libllama, libmtmd and llama-server does not read.
LLAMA_SKIP = (
    "models",
    "docs",
    "media",
    "tests",
    "examples",
    "benches",
    "gguf-py",
    "conversion",
    "tools/ui/src",  # the web UI's sources: with LLAMA_BUILD_UI=OFF its CMakeLists alone is read
    "tools/ui/tests",
    "tools/ui/static",
    "tools/server/public",
    "tools/server/tests",
    "tools/server/webui",
    ".devops",
    ".github",
)
GGML_OTHER_BACKENDS = (
    "cann", "et", "hexagon", "metal", "musa", "opencl", "openvino", "sycl", "virtgpu", "vulkan",
    "webgpu", "zdnn", "hip", "zendnn", "blas", "kompute",
)  # fmt: skip
EMBEDDER_FILES = (
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "1_Pooling/config.json",
)


def sdist(version_: str = LLAMA_VERSION) -> Path:
    """The unpacked llama-cpp-python sdist (scripts/llama_sdist.sh: downloaded once, cached)."""
    env = {**os.environ, "LLAMA_VERSION": version_, "PYTHON": sys.executable}
    script = ROOT / "scripts" / "llama_sdist.sh"
    out = subprocess.run([str(script)], env=env, check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def _skipped_llama(rel: str) -> bool:
    parts = rel.split("/")
    if rel.endswith(".gguf") or ".git" in parts:
        return True
    if any(rel == s or rel.startswith(s + "/") for s in LLAMA_SKIP):
        return True
    if len(parts) > 2 and parts[:2] == ["ggml", "src"]:
        return any(parts[2] == f"ggml-{b}" for b in GGML_OTHER_BACKENDS)
    return False


def pack_tree(src: Path, out: Path, arcname: str, skip=lambda rel: False) -> None:  # noqa: ANN001
    """`src` as `arcname/...` in an xz tarball, leaving out what `skip(relative path)` names."""

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        rel = info.name.removeprefix(arcname).lstrip("/")
        return None if rel and skip(rel) else info

    # xz's fastest preset: the tree is a few MiB at any preset, far under the limit, and the
    # strongest took many times as long (docs/benchmarks.md, GPU).
    with tarfile.open(out, "w:xz", preset=1) as tar:
        tar.add(src, arcname=arcname, filter=keep)


def download_wheels(out: Path, names: tuple[str, ...] = WHEELS) -> list[str]:
    """cp312 manylinux wheels of `names`, at the versions installed here."""
    out.mkdir(parents=True, exist_ok=True)
    pins = [f"{n}=={version(n)}" for n in names]
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "-q"]
    cmd += ["--no-deps", "--only-binary=:all:", "--python-version", "3.12"]
    cmd += ["--implementation", "cp", "-d", str(out)]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run([*cmd, *pins], check=True)
    return pins


def llm_skeleton(model: str, out: Path) -> None:
    """The model's GGUF metadata (architecture, tokenizer) with no tensors."""
    import gguf

    from bench.gpu.random_model import copy_metadata

    reader = gguf.GGUFReader(model)
    writer = gguf.GGUFWriter(str(out), arch=str(reader.fields["general.architecture"].contents()))
    copy_metadata(reader, writer, {})
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def embedder_config(out: Path) -> None:
    from rag.model_files import packaged_model_dir

    src = Path(packaged_model_dir())
    for name in EMBEDDER_FILES:
        if (src / name).exists():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / name, out / name)


def cpu_cmake_args() -> str:
    """The Makefile's CPU build flags (`make cpu-args`)."""
    run = subprocess.run(
        ["make", "-s", "--no-print-directory", "cpu-args"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout.strip()


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build(out: Path = OUT) -> dict:
    from app.config_derived import packaged_model_path

    if out.exists():
        shutil.rmtree(out)
    (out / "models" / "minilm").mkdir(parents=True)
    src = sdist()
    pack_tree(src / "vendor" / "llama.cpp", out / "llama.cpp.tar.xz", "llama.cpp", _skipped_llama)
    skip_libs = lambda rel: rel.split("/")[0] in ("lib", "server") or rel.endswith(".pyc")  # noqa: E731
    pack_tree(src / "llama_cpp", out / "llama_cpp.tar.xz", "llama_cpp", skip_libs)
    pins = download_wheels(out / "wheels")
    llm_skeleton(packaged_model_path(), out / "models" / "smollm2-metadata.gguf")
    embedder_config(out / "models" / "minilm")
    files = {
        str(f.relative_to(out)): f.stat().st_size for f in sorted(out.rglob("*")) if f.is_file()
    }
    manifest = {
        "llama_cpp_python": LLAMA_VERSION,
        "cpu_cmake_args": cpu_cmake_args(),
        "wheels": pins,
        "files": files,
        "bytes": sum(files.values()),
        "limit_bytes": LIMIT_BYTES,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu.kit", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    manifest = build(args.out)
    size = folder_bytes(args.out)
    print(f"{args.out}: {size / 2**20:.1f} MiB (limit {LIMIT_BYTES / 2**20:.0f} MiB)")
    if size > LIMIT_BYTES:
        print("the kit is over its limit", file=sys.stderr)
        return 1
    print(json.dumps({k: v for k, v in manifest.items() if k != "files"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
