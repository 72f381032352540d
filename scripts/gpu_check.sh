#!/usr/bin/env bash
# The GPU check, in one call of the GPU machine: build llama.cpp with CUDA, make the models, run
# kvchat beside llama-server (bench/gpu/check.py), one table. Everything it needs is the work
# tree and the kit (`make gpu-kit`, build/gpu-kit, carried with the call).
#
#   scripts/gpu_check.sh [--out DIR] [--kit DIR] [--rehearsal]
#
# On the GPU machine (the device tool's command, with build/gpu-kit carried):
#   scripts/gpu_check.sh --out "$OUT"
# Steps, each timed in DIR/steps.log:
#   1. unpack the kit; install its wheels into a folder of their own (no network);
#   2. build llama.cpp from the kit's source for the present card's architecture only: the
#      shared libraries our server loads (LLAMA_CPP_LIB_PATH) and llama-server, one cmake tree;
#      its CPU part with our CPU variants (the kit's cpu_cmake_args), CUDA one more module;
#   3. make the models: the packaged model's shape and tokenizer, and Llama 3.2 1B's layer shapes,
#      with random weights (bench/gpu/random_model.py), and a random embedder;
#   4. bench/gpu/check.py with `-ngl 999 -fa on` for both servers.
# DIR gets at most 8 files (what comes back from a device call): gpu-check.md, gpu-check.json,
# steps.log, build.log and logs.tar.xz (both servers' logs and every part's raw report).
#
# --rehearsal (make test, on the CPU): the same steps on this machine, so the kit works the first
# time a GPU machine is there: the wheels are checked for a cp312 manylinux install instead of
# installed (this Python is another version), cmake only configures the kit's source (a CPU
# build takes ~15 minutes on 2 cores), the libraries are the venv's llama-cpp-python's, loaded
# through the kit's package, and the model is tiny, with bench.compare's quick plans. llama-server
# is build/llama-server's (`make llama-server`) or --llama-server's; where neither is built, the
# rehearsal runs ours alone.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kit=$root/build/gpu-kit
out=$root/build/gpu-check
rehearsal=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --kit) kit=$2; shift 2 ;;
        --rehearsal) rehearsal=1; shift ;;
        --llama-server) llama_server=$2; shift 2 ;;
        *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ -f $kit/MANIFEST.json ]] || { echo "gpu_check.sh: no kit at $kit (make gpu-kit)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/kvchat-gpu-XXXXXX)
steps=$out/steps.log
: >"$steps"
step() { echo "[$(date +%T)] $*" | tee -a "$steps"; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# --- 1. the kit ---------------------------------------------------------------------------
step "unpack the kit ($(du -sh "$kit" | cut -f1))"
tar xJf "$kit/llama.cpp.tar.xz" -C "$work"
mkdir -p "$work/site"
tar xJf "$kit/llama_cpp.tar.xz" -C "$work/site"
if [[ $rehearsal == 1 ]]; then
    python=$root/.venv/bin/python
    # The wheels must install on the GPU machine's Python 3.12 (manylinux x86-64).
    "$python" -m pip --disable-pip-version-check install -q --dry-run --no-index --no-deps \
        --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --target "$work/dry" "$kit"/wheels/*.whl
else
    python=python3
    "$python" -m pip --disable-pip-version-check install -q --no-index --no-deps \
        --no-compile --target "$work/site" "$kit"/wheels/*.whl
fi
# The kit's llama_cpp package (no libraries of its own) before anything installed.
export PYTHONPATH=$work/site:$root
step "python: $("$python" --version), wheels: $(ls "$kit"/wheels | wc -l)"

# --- 2. llama.cpp ---------------------------------------------------------------------------
src=$work/llama.cpp
tree=$work/build
cmake_args=(
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
)
# The CPU part as ours: the kit's CPU flags (the Makefile's variants, loaded at run time).
read -r -a cpu_args < <("$python" -c \
    'import json, sys; print(json.load(open(sys.argv[1]))["cpu_cmake_args"])' "$kit/MANIFEST.json")
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ $rehearsal == 1 ]]; then
    step "configure llama.cpp (CPU; the rehearsal builds nothing)"
    cmake -S "$src" -B "$tree" "${generator[@]}" "${cmake_args[@]}" "${cpu_args[@]}" \
        >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
    libs=$(PYTHONPATH= "$root/.venv/bin/python" -c \
        'import importlib.util, pathlib; s = importlib.util.find_spec("llama_cpp"); \
print(pathlib.Path(s.origin).parent / "lib")')
    llama_server=${llama_server:-$root/build/llama-server/bin/llama-server}
    server_args="-fa on"
    plan=(--rehearsal --threads 2 --parallel 4 --ctx-size 8192 --more-clients 16)
    [[ -x $llama_server ]] || plan+=(--servers ours)
else
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
    step "build llama.cpp for sm_$arch with $(nproc) jobs"
    {
        cmake -S "$src" -B "$tree" "${generator[@]}" "${cmake_args[@]}" "${cpu_args[@]}" \
            -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch"
        cmake --build "$tree" -j "$(nproc)" --target llama mtmd llama-server
    } >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
    libs=$tree/bin
    llama_server=$tree/bin/llama-server
    server_args="-ngl 999 -fa on"
    plan=(--threads 8 --parallel 32 --ctx-size 65536 --more-clients 32)
fi
export LLAMA_CPP_LIB_PATH=$libs MTMD_CPP_LIB=$libs
step "libraries: $libs; llama-server: $llama_server"
loaded=$("$python" -c 'import llama_cpp; print(llama_cpp.__file__)')
step "llama_cpp: $loaded"

# --- 3. models ------------------------------------------------------------------------------
models=$work/models
mkdir -p "$models"
cp -r "$kit/models/minilm" "$models/minilm"
"$python" -m bench.gpu.random_model --embedder "$models/minilm" >/dev/null
meta=$kit/models/smollm2-metadata.gguf
if [[ $rehearsal == 1 ]]; then
    "$python" -m bench.gpu.random_model "$meta" "$models/tiny.gguf" --shape tiny >/dev/null
    list="tiny=$models/tiny.gguf"
else
    "$python" -m bench.gpu.random_model "$meta" "$models/smollm2.gguf" --shape smollm2-135m \
        --quantize q4_1 >/dev/null
    "$python" -m bench.gpu.random_model "$meta" "$models/llama-1b.gguf" --shape llama-1b \
        --quantize q4_k_m >/dev/null
    list="llama-1b=$models/llama-1b.gguf,smollm2-135m=$models/smollm2.gguf"
fi
step "models: $(cd "$models" && ls -s --block-size=M ./*.gguf | tr '\n' ' ')"

# --- 4. the rows ----------------------------------------------------------------------------
step "bench/gpu/check.py: $list"
# What is left of the call's 10 minutes (GPU_CHECK_SECONDS from the start: 540 by default, an
# hour in a rehearsal) less a minute to collect the results: at the limit the check stops its
# servers and keeps the models that finished.
budget=${GPU_CHECK_SECONDS:-$([[ $rehearsal == 1 ]] && echo 3600 || echo 540)}
left=$((budget - SECONDS - 60))
status=0
(cd "$root" && timeout -s INT -k 30 "$left" "$python" -m bench.gpu.check --llama-server "$llama_server" --models "$list" \
    --server-args "$server_args" \
    --ours-args "--embedding-model $models/minilm --embedding-backend torch" \
    "${plan[@]}" --out "$work/check") || status=$?
cp "$work/check/gpu-check.md" "$work/check/gpu-check.json" "$out/" 2>/dev/null || true
tar cJf "$out/logs.tar.xz" -C "$work" check -C "$root/build" bench-logs 2>/dev/null || true
step "done (status $status)"
rm -rf "$work"
exit "$status"
