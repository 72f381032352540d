"""llama-cpp-python's wheel for this machine: reused from the wheel cache when one was built with
the same flags and runs on this CPU, else built (scripts/build_llama_wheel.sh).

    python scripts/llama_wheel.py --wheels DIR --version V --backend cpu --cmake-args "..."

Prints the wheel's path on stdout; says on stderr which build it made or reused, and which CPU
variant (or GPU backend) it runs here.

The cache is keyed by what the build holds: the version, the backend, the platform and a hash of
the cmake flags, so a wheel built with other flags is never taken for this one. A build for the
machine it was made on (`GGML_NATIVE`, the default where the Makefile passes no CPU flags: aarch64,
macOS) also keys on the CPU's model and features, since it may not run on another. Before a wheel
is handed out, a child process loads its CPU backend (mm/ggml_backends.py): a wheel none of whose
CPU variants runs here, or that dies trying (SIGILL), is never installed. A cached one is then
rebuilt once; a freshly built one is an error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(slots=True, frozen=True)
class WheelKey:
    version: str
    backend: str
    machine: str  # platform.system()-platform.machine(), e.g. Linux-x86_64
    cmake_args: tuple[str, ...]
    cpu: str | None  # the CPU a native build is tied to; None when it runs on any CPU

    @property
    def digest(self) -> str:
        text = json.dumps([self.version, self.backend, self.machine, self.cmake_args, self.cpu])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def folder(self) -> str:
        return f"{self.version}-{self.backend}-{self.machine}-{self.digest}"

    @property
    def variants(self) -> str:
        for arg in self.cmake_args:
            if arg.startswith("-DGGML_CPU_VARIANTS="):
                return arg.split("=", 1)[1].replace(",", " ")
        return "native" if self.cpu else "ggml's default"


def is_native(cmake_args: tuple[str, ...]) -> bool:
    """llama.cpp builds for the build machine (-march=native) unless told otherwise."""
    return not any(a in ("-DGGML_NATIVE=OFF", "-DGGML_NATIVE=0") for a in cmake_args)


def cpu_identity() -> str:
    """The CPU's model and features, as a native build depends on them."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = flags = ""
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = " ".join(sorted(value.split()))
        return f"{model} | {flags}"
    if sys.platform == "darwin":
        out = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True
        )
        return out.stdout.strip()
    return platform.processor()


def make_key(version: str, backend: str, cmake_args: str) -> WheelKey:
    args = tuple(shlex.split(cmake_args))
    machine = f"{platform.system()}-{platform.machine()}"
    return WheelKey(version, backend, machine, args, cpu_identity() if is_native(args) else None)


def runs_here(wheel: Path, launcher: tuple[str, ...] = ()) -> tuple[bool, str]:
    """Load the wheel's CPU backend in a child process: (it runs, what it said). `launcher`
    prefixes the child's command (the tests run it on an emulated CPU)."""
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("llama_cpp/lib/"):
                    z.extract(name, tmp)
        lib = Path(tmp) / "llama_cpp" / "lib"
        child = subprocess.run(
            [*launcher, sys.executable, "-m", "mm.ggml_backends", str(lib)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    if child.returncode < 0:
        return False, f"died with signal {-child.returncode} loading its CPU backend"
    said = (child.stdout or child.stderr).strip()
    return child.returncode == 0, said


def build(key: WheelKey, folder: Path, python: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        old.unlink()
    started = time.monotonic()
    subprocess.run(
        [str(ROOT / "scripts/build_llama_wheel.sh"), str(folder)],
        env={
            **os.environ,
            "LLAMA_VERSION": key.version,
            "LLAMA_CMAKE_ARGS": shlex.join(key.cmake_args),
            "PYTHON": python,
        },
        check=True,
        stdout=sys.stderr,  # stdout carries the wheel's path alone
    )
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    record = {
        "version": key.version,
        "backend": key.backend,
        "machine": key.machine,
        "cmake_args": list(key.cmake_args),
        "cpu": key.cpu,
        "built_on": cpu_identity().split(" | ")[0],
        "build_time": f"{minutes} min {seconds} s",
    }
    (folder / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    return _wheel_in(folder)


def _wheel_in(folder: Path) -> Path:
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"llama_wheel.py: expected one wheel in {folder}, found {len(wheels)}")
    return wheels[0]


def say(text: str) -> None:
    print(f"llama_wheel.py: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, required=True, help="the wheel cache")
    parser.add_argument("--version", required=True, help="llama-cpp-python's version")
    parser.add_argument("--backend", default="cpu", help="cpu, cuda or vulkan")
    parser.add_argument("--cmake-args", default="", help="the Makefile's LLAMA_CMAKE_ARGS")
    parser.add_argument("--python", default=sys.executable, help="the Python pip builds with")
    args = parser.parse_args(argv)

    key = make_key(args.version, args.backend, args.cmake_args)
    folder = args.wheels / key.folder
    what = f"llama-cpp-python {key.version} ({key.backend}; CPU variants: {key.variants})"
    cached = sorted(folder.glob("llama_cpp_python-*.whl"))
    if cached:
        ok, said = runs_here(cached[0])
        if ok:
            say(f"reused {what} from {folder}; here: {said}")
            print(cached[0])
            return 0
        say(f"the cached {what} in {folder} does not run on this CPU ({said}): rebuilding it")
    say(f"building {what} into {folder}")
    wheel = build(key, folder, args.python)
    ok, said = runs_here(wheel)
    if not ok:
        say(f"the wheel just built does not run on this CPU: {said}")
        return 1
    record = json.loads((folder / "build.json").read_text())
    say(f"built {what} in {record['build_time']}; here: {said}")
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
