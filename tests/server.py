"""A real server process for tests and benches: `python -m app` on a free loopback port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        # A database and files of its own unless the caller names a data directory.
        self._own_data = None if "--data-dir" in args else tempfile.mkdtemp(prefix="kvchat-")
        own = ["--data-dir", self._own_data] if self._own_data else []
        self.args = ["--host", "127.0.0.1", "--port", str(self.port), *own, *args]
        # The database is the caller's choice (--database-url), never the developer's own.
        inherited = {
            k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KVCHAT_DATABASE_URL")
        }
        self.env = {**inherited, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = ROOT / ".pytest_cache" / f"server-{self.port}.log"

    def start(self, timeout: float = 120.0) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", *self.args],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.base_url + "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"server did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._own_data:
            shutil.rmtree(self._own_data, ignore_errors=True)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
