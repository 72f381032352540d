"""`python -m app`: the process's own flags, through a real server."""

from __future__ import annotations

import httpx

from bench.lib.server_process import ServerProcess


def test_several_host_addresses_are_all_served():
    """llama-server's --host a,b: one server answers on every address."""
    with ServerProcess("-np", "1", "-c", "512", "--host", "127.0.0.1,127.0.0.2") as srv:
        port = srv.base_url.rsplit(":", 1)[1]
        for host in ("127.0.0.1", "127.0.0.2"):
            r = httpx.get(f"http://{host}:{port}/health", timeout=30)
            assert r.status_code == 200 and r.json()["status"] == "ok"
