"""`Cluster`: N replicas of the server on one database with a shared KV tier, behind nginx.

Replica i (1..N) listens on 127.0.0.1:PORT+i with a data directory of its own
(`<work>/replica-i`), the shared disk tier `<work>/kv` (--cache-dir, --cache-shared) and the name
`replica-i` (X-Replica, its cache journal); nginx listens on PORT. The first replica starts
alone (it migrates the database schema), the others then together. Every replica gets the same
extra flags. What a machine-per-replica deployment looks like: docs/deployment.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.api.middleware.browser_guard import is_local_name
from app.cluster.nginx import Nginx, largest_body_of_settings

ROOT = Path(__file__).resolve().parents[2]


@dataclass(slots=True)
class Layout:
    port: int  # nginx's; replica i gets port + i
    replicas: int
    work: Path  # data directories, the shared KV tier, nginx's files
    database_url: str
    args: list[str] = field(default_factory=list)  # for every replica
    host: str = "127.0.0.1"  # nginx's address; replicas listen on loopback


@dataclass(slots=True)
class Replica:
    name: str
    port: int
    command: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    """Start with `start()`, end with `stop()` (also after a failed start)."""

    def __init__(self, layout: Layout, echo: Callable[[str], None] | None = None) -> None:
        """`echo(line)`: each output line of each replica, prefixed with its name (None: to
        its log file only)."""
        self.layout = layout
        self.echo = echo
        self.cache_dir = layout.work / "kv"
        self.replicas = [self._replica(i) for i in range(1, layout.replicas + 1)]
        limit = largest_body_of_settings(layout.args)
        listen = f"{layout.host}:{layout.port}"
        upstreams = [f"127.0.0.1:{r.port}" for r in self.replicas]
        self.nginx = Nginx(listen, upstreams, limit, layout.work / "nginx")

    @property
    def url(self) -> str:
        return f"http://{self.layout.host}:{self.layout.port}"

    def _replica(self, i: int) -> Replica:
        name, port = f"replica-{i}", self.layout.port + i
        data = self.layout.work / name
        command = [
            sys.executable,
            "-m",
            "app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(data),
            "--database-url",
            self.layout.database_url,
            "--cache-dir",
            str(self.cache_dir),
            "--cache-shared",
            "--replica-name",
            name,
            *self._host_args(),
            *self.layout.args,
        ]
        return Replica(name, port, command, self.layout.work / f"{name}.log")

    def _host_args(self) -> list[str]:
        """nginx passes the client's Host (deploy/nginx.conf): replicas on loopback answer any
        name when nginx itself listens beyond loopback (it is the one DNS rebinding reaches)."""
        return [] if is_local_name(self.layout.host) else ["--allowed-hosts", "*"]

    def start(self, timeout: float = 300.0) -> None:
        self.layout.work.mkdir(parents=True, exist_ok=True)
        first, *rest = self.replicas
        self.start_replica(first)
        self.wait_healthy([first], timeout)
        for replica in rest:
            self.start_replica(replica)
        self.wait_healthy(rest, timeout)
        self.nginx.start()
        self._wait_nginx(timeout)

    def start_replica(self, replica: Replica) -> None:
        """(Re)start one replica; its output goes to its log (and to `echo`)."""
        env = {
            k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KVCHAT_DATABASE_URL")
        }
        replica.proc = subprocess.Popen(
            replica.command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # Not in the terminal's process group: Ctrl-C reaches the cluster, which stops
            # nginx first and then each replica, in order.
            start_new_session=True,
        )
        threading.Thread(target=self._copy_output, args=(replica,), daemon=True).start()

    def _copy_output(self, replica: Replica) -> None:
        assert replica.proc is not None and replica.proc.stdout is not None
        with replica.log_path.open("ab") as log:
            for line in replica.proc.stdout:
                log.write(line)
                log.flush()
                if self.echo is not None:
                    self.echo(f"[{replica.name}] {line.decode(errors='replace').rstrip()}")

    def wait_healthy(self, replicas: list[Replica], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for replica in replicas:
            while not _healthy(replica.url):
                if not replica.alive:
                    raise RuntimeError(f"{replica.name} exited:\n{self.log_tail(replica)}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{replica.name} did not start:\n{self.log_tail(replica)}")
                time.sleep(0.2)

    def _wait_nginx(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not _healthy(self.url):
            proc = self.nginx.proc
            if proc is None or proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not start:\n{self.nginx.error_log()}")
            time.sleep(0.1)

    @staticmethod
    def log_tail(replica: Replica, n: int = 4000) -> str:
        path = replica.log_path
        return path.read_text(errors="replace")[-n:] if path.exists() else ""

    def stop(self) -> None:
        """nginx first (no new requests), then every replica: SIGTERM, SIGKILL after 30 s."""
        self.nginx.stop()
        for replica in self.replicas:
            if replica.alive:
                replica.proc.terminate()
        for replica in self.replicas:
            if replica.proc is None:
                continue
            try:
                replica.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                replica.proc.kill()
                replica.proc.wait()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False
