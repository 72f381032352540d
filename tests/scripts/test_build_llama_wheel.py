"""scripts/build_llama_wheel.sh: the llama-cpp-python wheel built from its sdist without
llama.cpp's `common` and with every backend module. The compile itself (~4 min) is not run here:
`pip wheel` is replaced by a recorder that checks what it was handed; the sdist is the real one
(scripts/llama_sdist.sh)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_llama_wheel.sh"
FORCE = 'set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'

# A python that records a `pip wheel` call (its CMAKE_ARGS and the source's CMakeLists) and
# writes a wheel-named file; anything else (the sdist's `pip download`, the patch) goes to the
# real one.
FAKE_PYTHON = """#!/usr/bin/env bash
if [[ " $* " == *" -m pip "*" wheel "* ]]; then
    src="${@: -1}"; out=""
    while [[ $# -gt 0 ]]; do [[ $1 == -w ]] && out=$2; shift; done
    echo "$CMAKE_ARGS" > "$RECORD/cmake_args"
    cp "$src/CMakeLists.txt" "$RECORD/CMakeLists.txt"
    touch "$out/llama_cpp_python-0.0.0-py3-none-linux_x86_64.whl"
    exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def test_the_wheel_is_built_without_common_and_the_shared_sdist_is_left_as_it_was(tmp_path: Path):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    record, wheels = tmp_path / "record", tmp_path / "wheels"
    record.mkdir()
    env = os.environ | {
        "PYTHON": str(fake),
        "REAL_PYTHON": sys.executable,
        "RECORD": str(record),
        "LLAMA_CMAKE_ARGS": "-DGGML_NATIVE=OFF",
    }
    done = subprocess.run(
        [str(SCRIPT), str(wheels)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert list(wheels.glob("llama_cpp_python-*.whl"))
    assert (record / "cmake_args").read_text().split() == [
        "-DGGML_NATIVE=OFF",
        "-DLLAMA_BUILD_COMMON=OFF",
    ]
    built_from = (record / "CMakeLists.txt").read_text()
    assert FORCE not in built_from and "add_subdirectory(vendor/llama.cpp)" in built_from
    # The CPU variants' modules go into the wheel (scripts/patch_llama_cpp.py).
    assert "foreach(backend ${GGML_AVAILABLE_BACKENDS})" in built_from
    # The unpacked sdist that llama-server's build and the conformance tests read is untouched.
    sdist = subprocess.run(
        [str(ROOT / "scripts" / "llama_sdist.sh")],
        env=env | {"PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert FORCE in (Path(sdist) / "CMakeLists.txt").read_text()
