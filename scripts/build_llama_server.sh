#!/usr/bin/env bash
# Build llama.cpp's llama-server from the llama.cpp that llama-cpp-python vendors, for the benchmark.
#
#   scripts/build_llama_server.sh [OUT_DIR]     (default build/llama-server)
#
# Gets the llama-cpp-python sdist from PyPI (scripts/llama_sdist.sh: pip download, unpacked once
# under ~/.cache/kvchat-sdist) and builds only the `llama-server` target of its vendor/llama.cpp
# with cmake, with the same ggml flags as the llama-cpp-python wheel (Makefile: LLAMA_CMAKE_ARGS:
# on x86-64 the CPU variants, loaded at run time from beside the binary, so it runs on every
# x86-64 CPU as our server does). Shared libraries (GGML_BACKEND_DL needs them), CPU only, no
# OpenSSL, no web UI download. The binary and its libraries land in OUT_DIR/bin (the binary finds
# them through an $ORIGIN rpath); OUT_DIR/.version records the version and a hash of the flags,
# and when both match this script does nothing. The scratch directory (OUT_DIR/work: the cmake tree) is
# kept after a failure so a rerun resumes, and deleted after a success.
#
# Environment: LLAMA_VERSION (default 0.3.36), LLAMA_CMAKE_ARGS (the ggml flags; default below,
# the Makefile passes its own), PYTHON (for pip; default .venv/bin/python, else python3).
# Build output goes to stderr; the binary's path is the last line on stdout.
set -euo pipefail

log() { echo "build_llama_server.sh: $*" >&2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

out=$(realpath -m "${1:-build/llama-server}")
version=${LLAMA_VERSION:-0.3.36}
ggml_args=${LLAMA_CMAKE_ARGS:-"-DLLAMA_CURL=OFF"}
# shellcheck disable=SC2206  # word splitting wanted: a flat list of -D flags
cmake_args=(
    $ggml_args
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=ON
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON
    "-DCMAKE_INSTALL_RPATH=\$ORIGIN"
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_TOOLS=ON      # tools/server lives under tools/
    -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_APP=OFF
    -DLLAMA_OPENSSL=OFF         # HTTPS client support only (model download); not needed
    -DLLAMA_BUILD_UI=OFF        # no npm build ...
    -DLLAMA_USE_PREBUILT_UI=OFF # ... and no Hugging Face download: the server runs without web UI
)
flags_hash=$(printf '%s\n' "$version" "${cmake_args[@]}" | sha256sum | cut -c1-16)
stamp="llama-cpp-python==$version flags-sha256=$flags_hash"
bin="$out/bin/llama-server"

if [[ -x $bin && -f $out/.version && $(cat "$out/.version") == "$stamp" ]]; then
    log "up to date ($stamp)"
    echo "$bin"
    exit 0
fi

# --- tools --------------------------------------------------------------------------------
if [[ -n ${PYTHON:-} ]]; then
    python=$PYTHON
elif [[ -x $root/.venv/bin/python ]]; then
    python=$root/.venv/bin/python
else
    python=python3
fi

apt_install() {
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
        log "missing $*; install it (apt-get install $*)"
        exit 1
    fi
    log "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

if ! command -v c++ >/dev/null || ! command -v cc >/dev/null || ! command -v make >/dev/null; then
    apt_install build-essential
fi

cmake_ok() {  # llama.cpp's UI asset script needs cmake >= 3.18
    local v
    v=$("$1" --version 2>/dev/null | sed -n '1s/.* \([0-9][0-9.]*\).*/\1/p') || return 1
    [[ -n $v ]] && printf '%s\n%s\n' 3.18 "$v" | sort -V -C
}
cmake=$(command -v cmake || true)
if [[ -z $cmake ]] || ! cmake_ok "$cmake"; then
    cmake=$(dirname "$python")/cmake
    if ! cmake_ok "$cmake"; then
        log "cmake >= 3.18 not found: installing it with pip"
        "$python" -m pip --disable-pip-version-check install -q cmake >&2
    fi
    cmake_ok "$cmake" || { log "no usable cmake at $cmake"; exit 1; }
fi

# --- sources ------------------------------------------------------------------------------
llama_src="$(PYTHON=$python LLAMA_VERSION=$version scripts/llama_sdist.sh)/vendor/llama.cpp"
work="$out/work"
mkdir -p "$work"

# --- build --------------------------------------------------------------------------------
tree="$work/cmake-build"
if [[ ! -f $tree/.flags || $(cat "$tree/.flags") != "$stamp" ]]; then
    rm -rf "$tree"
fi
mkdir -p "$tree"
log "configuring: ${cmake_args[*]}"
"$cmake" -S "$llama_src" -B "$tree" "${cmake_args[@]}" >&2
echo "$stamp" >"$tree/.flags"
jobs=$(nproc)
log "building llama-server with $jobs jobs"
start=$SECONDS
"$cmake" --build "$tree" --target llama-server -j "$jobs" >&2
log "built in $((SECONDS - start)) s"

rm -rf "$out/bin"
mkdir -p "$out/bin"
cp -P "$tree"/bin/*.so* "$out/bin/"
install -m 755 "$tree/bin/llama-server" "$bin"
echo "$stamp" >"$out/.version"
rm -rf "$work"
log "$("$bin" --version 2>&1 | grep -m1 version || true)"
echo "$bin"
