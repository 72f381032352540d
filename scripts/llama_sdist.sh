#!/usr/bin/env bash
# The llama-cpp-python sdist, downloaded with pip and unpacked once under ~/.cache/kvchat-sdist.
# Its vendor/llama.cpp is llama-server's source (scripts/build_llama_server.sh) and holds
# llama.cpp's own server tests and chat templates (make conformance). ggml's CMakeLists gets one
# opt-in change here, so that every build from this copy can name its CPU variants
# (scripts/patch_llama_cpp.py variants).
#
#   scripts/llama_sdist.sh      the unpacked directory, on stdout (pip's output goes to stderr)
#
# Environment: LLAMA_VERSION (default 0.3.36), PYTHON (for pip; default .venv/bin/python, else
# python3), KVCHAT_SDIST_CACHE (default ~/.cache/kvchat-sdist).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${LLAMA_VERSION:-0.3.36}
cache=${KVCHAT_SDIST_CACHE:-$HOME/.cache/kvchat-sdist}
src="$cache/llama_cpp_python-$version"

if [[ -n ${PYTHON:-} ]]; then
    python=$PYTHON
elif [[ -x $root/.venv/bin/python ]]; then
    python=$root/.venv/bin/python
else
    python=python3
fi
if [[ ! -f $src/.unpacked ]]; then
    mkdir -p "$cache"
    dl=$(mktemp -d "$cache/dl.XXXXXX")
    trap 'rm -rf "$dl"' EXIT
    echo "llama_sdist.sh: downloading the llama-cpp-python $version sdist" >&2
    "$python" -m pip --disable-pip-version-check download -q --no-deps --no-binary :all: \
        "llama-cpp-python==$version" -d "$dl" >&2
    rm -rf "$src"
    tar xzf "$dl/llama_cpp_python-$version.tar.gz" -C "$cache"
    test -f "$src/vendor/llama.cpp/CMakeLists.txt" || {
        echo "llama_sdist.sh: no vendor/llama.cpp in the sdist" >&2
        exit 1
    }
    touch "$src/.unpacked"
fi
# Idempotent: a copy unpacked before the change gets it too.
"$python" "$root/scripts/patch_llama_cpp.py" variants "$src"
echo "$src"
