"""`ChildServer`: one model's server process under the router (llama-server's router runs a child
llama-server per model the same way).

The child is `python -m app` with the model's flags and the router's own (every flag the router
was started with but the router's), on a free loopback port, with the router's database and a
data directory of its own. The router talks to it over HTTP (the requests it forwards, `/health`)
and with two signals: SIGUSR1 puts its model to sleep as soon as it is idle (the router's
unload: the slots' KV goes to the cache tiers, the weights are freed, the process and its host
tier stay), SIGUSR2 wakes it. A model the router loads again therefore keeps what it computed.

A child that exits (a file llama.cpp cannot load, a crash) takes nothing else with it: its
status is `failed`, with the last lines of its log as the reason.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

READY_TIMEOUT_S = 600.0  # a large model from a cold disk
LOG_TAIL_BYTES = 2000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChildServer:
    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.argv = [*argv, "--host", "127.0.0.1", "--port", str(self.port)]
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app", *self.argv],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the router's terminal is the router's
            )

    async def ready(self, client: httpx.AsyncClient, awake: bool) -> None:
        """Until `/health` answers (and, with `awake`, says the model is loaded); RuntimeError
        with the log's tail if the process exits or the time runs out."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(self.failure())
            try:
                r = await client.get(self.base_url + "/health", timeout=2.0)
                # Awake: its weights loaded, not only asked to wake (a request admitted while the
                # model wakes would wait behind the load, and the router count it loaded).
                if r.status_code == 200 and not (awake and not r.json().get("model_loaded", True)):
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the model server did not start in {READY_TIMEOUT_S:.0f} s")

    def sleep(self) -> None:
        """Unload: the model sleeps once its running requests end."""
        self._signal(signal.SIGUSR1)

    def wake(self) -> None:
        self._signal(signal.SIGUSR2)

    def _signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.proc is not None
            os.kill(self.proc.pid, sig)

    def failure(self) -> str:
        """Why the child is gone: its exit status and the end of its log."""
        code = self.proc.poll() if self.proc is not None else None
        try:
            with self.log_path.open("rb") as f:
                f.seek(max(0, self.log_path.stat().st_size - LOG_TAIL_BYTES))
                tail = f.read().decode("utf-8", "replace").strip().splitlines()[-5:]
        except OSError:
            tail = []
        lines = " | ".join(line.strip() for line in tail)
        return f"the model server exited with status {code}" + (f": {lines}" if lines else "")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (its slots' KV is saved to a disk tier if it has one), then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
