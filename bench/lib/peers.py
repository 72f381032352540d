"""The servers `python -m bench.compare` runs side by side, one at a time, on the same model file.

Every server gets the same model, 2 threads, 8192 context cells, 4 slots where it has slots, a
free loopback port and a log file under build/bench-logs/; `start()` waits until it answers its
health check, `stop()` ends it (SIGTERM, then SIGKILL after 30 s).

- ours: `python -m app -np 4 -c 8192 -t 2` with a temporary data directory of its own;
- llama-server: built from the llama.cpp that llama-cpp-python vendors (`make llama-server`) into
  build/llama-server/bin/llama-server, with `--kv-unified` and its default host prompt cache;
- llama-cpp-python: `python -m llama_cpp.server` with its RAM cache. It serves one request at a
  time. `--interrupt_requests false`: by default it cuts a stream short as soon as another
  request waits, which would end the concurrent scenarios' streams early.

The venv's llama-cpp-python wheel is built without AMX (see the Makefile), so its server is safe
on this machine's CPU. llama-cpp-python's server has no `ignore_eos`: `eog_logit_bias()` is how
every decode row makes each server generate all the tokens it is asked for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from bench.lib.server_process import ROOT, ManagedProcess, ServerProcess, free_port

THREADS = 2
CTX_SIZE = 8192
SLOTS = 4
LLAMA_SERVER = ROOT / "build" / "llama-server" / "bin" / "llama-server"
LOGS = ROOT / "build" / "bench-logs"
NAMES = ("ours", "llama-server", "llama-cpp-python")


@dataclass(frozen=True, slots=True)
class Profile:
    """How every server of a run is started: this machine's CPU figures by default; a GPU run
    (bench/gpu/check.py) sets its own threads, slots, context, the flags both servers take
    (`-ngl 999 -fa on`) and the llama-server built beside the CUDA libraries."""

    threads: int = THREADS
    ctx_size: int = CTX_SIZE
    slots: int = SLOTS
    common_args: tuple[str, ...] = ()  # given to ours and llama-server alike
    ours_args: tuple[str, ...] = ()  # given to ours alone (its embedder, say)
    llama_server: Path = LLAMA_SERVER


PROFILE = Profile()


def configure(**changes: object) -> Profile:
    """Set the profile of every server started from now on (a whole run has one)."""
    global PROFILE
    PROFILE = replace(PROFILE, **changes)  # type: ignore[arg-type]
    return PROFILE


@contextmanager
def profiled(**changes: object) -> Iterator[Profile]:
    """The profile with `changes` for the servers started inside the block, the one before it
    again after (a bench part that needs other flags leaves the rest of a run as it was)."""
    global PROFILE
    before = PROFILE
    try:
        yield configure(**changes)
    finally:
        PROFILE = before


class PeerUnavailable(RuntimeError):
    """The server cannot run here (not built, missing packages)."""


@dataclass
class Peer:
    """One server of the comparison: its process, and what the bench should know about it."""

    name: str
    process: ManagedProcess
    images: bool = False  # started with a projector: the image scenario runs
    notes: str = ""

    @property
    def command(self) -> list[str]:
        return self.process.command

    @property
    def base_url(self) -> str:
        return self.process.base_url

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def start(self, timeout: float = 180.0) -> Peer:
        self.process.start(timeout)
        return self

    def stop(self) -> None:
        self.process.stop()

    def __enter__(self) -> Peer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _external(name: str, command: list[str], port: int, health_path: str) -> ManagedProcess:
    return ManagedProcess(command, port, health_path, log_path=LOGS / f"{name}.log", name=name)


def ours(
    model: str,
    mmproj: str | None = None,
    slots: int | None = None,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Peer:
    args = [*_common(model, slots), *PROFILE.ours_args, *extra]
    if mmproj:
        args += ["--mmproj", mmproj]
    server = ServerProcess(*args, env=env)  # a temporary data directory of its own
    server.log_path, server.name = LOGS / "ours.log", "ours"
    return Peer("ours", server, images=bool(mmproj))


def _common(model: str, slots: int | None) -> list[str]:
    """The flags ours and llama-server share: model, slots, context, threads, the profile's."""
    p = PROFILE
    n = p.slots if slots is None else slots
    return ["-m", model, "-np", str(n), "-c", str(p.ctx_size), "-t", str(p.threads), *p.common_args]


def llama_server(
    model: str, mmproj: str | None = None, binary: Path | None = None, slots: int | None = None
) -> Peer:
    binary = binary or PROFILE.llama_server
    if not binary.exists():
        raise PeerUnavailable(f"{binary} is not built (make llama-server)")
    port = free_port()
    command = [
        str(binary),
        *_common(model, slots),
        "--kv-unified",
        "--host", "127.0.0.1",
        "--port", str(port),
    ]  # fmt: skip
    if mmproj:
        command += ["--mmproj", mmproj]
    process = _external("llama-server", command, port, "/health")
    return Peer("llama-server", process, images=bool(mmproj))


# `python -m llama_cpp.server` once ggml's backends are loaded from the wheel's folder: llama.cpp
# itself looks for the CPU variants' modules beside python's binary (mm/ggml_backends.py).
_LLAMA_CPP_SERVER = (
    f"import runpy, sys; sys.path.insert(0, {str(ROOT)!r}); "
    "from mm.ggml_backends import load_backends; load_backends(); "
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)"
)


def llama_cpp_python(model: str) -> Peer:
    """llama-cpp-python's server; it has no projector for this model's chat format: no images."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as e:
        raise PeerUnavailable(
            f"llama-cpp-python's server needs its [server] extra ({e}): pip install -e '.[dev]'"
        ) from e
    port = free_port()
    command = [
        sys.executable, "-c", _LLAMA_CPP_SERVER,
        "--model", model,
        "--n_ctx", str(CTX_SIZE),
        "--n_threads", str(THREADS),
        "--n_threads_batch", str(THREADS),
        "--cache", "true",
        "--cache_type", "ram",
        "--interrupt_requests", "false",
        "--host", "127.0.0.1",
        "--port", str(port),
    ]  # fmt: skip
    return Peer(
        "llama-cpp-python",
        _external("llama-cpp-python", command, port, "/v1/models"),
        notes="one request at a time (one context), RAM prompt cache",
    )


def make(name: str, model: str, mmproj: str | None = None, slots: int | None = None) -> Peer:
    if name == "ours":
        return ours(model, mmproj, slots)
    if name == "llama-server":
        return llama_server(model, mmproj, slots=slots)
    if name == "llama-cpp-python":
        return llama_cpp_python(model)
    raise ValueError(f"unknown server {name!r} (one of {', '.join(NAMES)})")


def llama_server_version(binary: Path | None = None) -> str | None:
    binary = binary or PROFILE.llama_server
    if not binary.exists():
        return None
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("version")]
    return lines[0].removeprefix("version:").strip() if lines else None


def eog_logit_bias(model: str) -> dict[str, float]:
    """-100 on every end-of-generation token: how a server without `ignore_eos` (llama-cpp-python)
    is made to generate all the requested tokens."""
    import llama_cpp

    with _quiet_stderr():
        llm = llama_cpp.Llama(model, vocab_only=True, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        n = llama_cpp.llama_vocab_n_tokens(vocab)
        ids = [i for i in range(n) if llama_cpp.llama_vocab_is_eog(vocab, i)]
        llm.close()
    return {str(i): -100.0 for i in ids}


class _quiet_stderr:
    """Silence llama.cpp's C-level log lines (fd 2) while loading the vocabulary."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)


def other_servers(exclude: set[int] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Server processes running on this machine besides `exclude` (pids): llama-server, ours,
    llama-cpp-python's. A timed server shares 2 cores with them, so a report names them."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        line = " ".join(words)
        if any(w.endswith("llama-server") for w in words[:1]) or _is_python_server(words):
            found.append(f"{entry.name}: {line[:120]}")
    return found


def _is_python_server(words: list[str]) -> bool:
    modules = ("app", "app.router_server", "llama_cpp.server")
    return "-m" in words and any(m in words for m in modules)
