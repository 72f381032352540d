"""A real server process for benches and tests: `python -m app` on a free loopback port."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ManagedProcess:
    """Any HTTP server process: started on a loopback port, ready when its health path answers
    200, stopped with SIGTERM (SIGKILL after 30 s); output goes to `log_path`."""

    def __init__(
        self,
        command: list[str],
        port: int,
        health_path: str = "/health",
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        name: str = "server",
    ) -> None:
        self.command = command
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.health_path = health_path
        self.env = env if env is not None else dict(os.environ)
        self.log_path = log_path or ROOT / ".pytest_cache" / f"server-{port}.log"
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                r = httpx.get(self.base_url + self.health_path, timeout=1.0)
                if r.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"{self.name} did not start:\n{self.log()}")

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the process has used so far; None when it is not running.
        A bench that keeps several servers up shows with it that the idle ones computed nothing
        while another was timed."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        fields = self._stat()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else None

    def pause(self) -> None:
        """Freeze the process (SIGSTOP: no thread of it runs, so it takes no CPU) while another
        server is timed beside it; returns once it is stopped (a signal is delivered when the
        process is next scheduled, not at once). `resume` lets it go on."""
        self._signal(signal.SIGSTOP, stopped=True)

    def resume(self) -> None:
        self._signal(signal.SIGCONT, stopped=False)

    def _signal(self, sig: signal.Signals, stopped: bool, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, sig)
        deadline = time.monotonic() + timeout
        while (self.state() == "T") != stopped:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not {'stop' if stopped else 'go on'}")
            time.sleep(0.001)

    def state(self) -> str:
        """The process's state letter in /proc (R running, S sleeping, T stopped, ...); "" when
        it is gone."""
        fields = self._stat()
        return fields[0] if fields else ""

    def _stat(self) -> list[str]:
        """/proc/PID/stat's fields after the command name (state first); [] when it is gone."""
        if self.proc is None:
            return []
        try:
            return Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return []

    def log(self, n: int = 5000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.resume()  # a frozen process would not act on SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):  # noqa: ANN204 (the subclass's own type)
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServerProcess(ManagedProcess):
    """Our server: `python -m app ARGS` with a data directory of its own unless given one."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        port = free_port()
        # A database and files of its own unless the caller names a data directory.
        self._own_data = None if "--data-dir" in args else tempfile.mkdtemp(prefix="kvchat-")
        own = ["--data-dir", self._own_data] if self._own_data else []
        self.args = ["--host", "127.0.0.1", "--port", str(port), *own, *args]
        # The database is the caller's choice (--database-url), never the developer's own.
        inherited = {
            k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KVCHAT_DATABASE_URL")
        }
        super().__init__(
            [sys.executable, "-m", "app", *self.args], port, env={**inherited, **(env or {})}
        )

    def stop(self) -> None:
        super().stop()
        if self._own_data:
            shutil.rmtree(self._own_data, ignore_errors=True)


def make_key(data_dir: Path | str, name: str, *extra: str) -> str:
    """A new API key from `python -m app keys create` (its last line), for a server of that
    data directory."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "keys",
            "create",
            "--name",
            name,
            "--data-dir",
            str(data_dir),
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]  # the key alone on the last line
