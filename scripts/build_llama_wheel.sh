#!/usr/bin/env bash
# Build the llama-cpp-python wheel from its sdist, without llama.cpp's `common` library and with
# every backend module ggml builds (the CPU variants among them).
#
#   scripts/build_llama_wheel.sh WHEEL_DIR
#
# llama-cpp-python's CMakeLists forces LLAMA_BUILD_COMMON on, which compiles llama.cpp's
# `common` (argument parsing, chat parsers, JSON schema: the heaviest C++ of the tree) and
# cpp-httplib, and ships them as libllama-common.so; its Python bindings never load that
# library (they bind libllama, libggml* and libmtmd). This script builds the same wheel with the
# force removed and LLAMA_BUILD_COMMON=OFF: the same libraries the bindings load, in less of the
# first `make install` (figures: docs/development.md, "How long a fresh machine takes").
#
# Gets the sdist through scripts/llama_sdist.sh (the unpacked copy under ~/.cache/kvchat-sdist
# stays as it is: llama-server and the conformance tests read it), patches a scratch copy
# (scripts/patch_llama_cpp.py wheel: the force removed, the backend modules installed) and runs
# `pip wheel` on it. Environment: LLAMA_VERSION, LLAMA_CMAKE_ARGS (the Makefile's ggml flags),
# PYTHON (for pip; default python3).
set -euo pipefail

log() { echo "build_llama_wheel.sh: $*" >&2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "${1:?usage: build_llama_wheel.sh WHEEL_DIR}"
wheels=$(cd "$1" && pwd)
python=${PYTHON:-python3}
src=$(PYTHON=$python "$root/scripts/llama_sdist.sh")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/src"
"$python" "$root/scripts/patch_llama_cpp.py" wheel "$work/src"
log "building llama-cpp-python $(basename "$src") into $wheels"
CMAKE_ARGS="${LLAMA_CMAKE_ARGS:-} -DLLAMA_BUILD_COMMON=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=$("$python" -c 'import os; print(os.cpu_count())') \
    "$python" -m pip --disable-pip-version-check wheel --no-deps -w "$wheels" "$work/src"
