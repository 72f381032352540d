"""Attacks on API keys: keys fail closed. A server whose database holds keys stays keyed when
the last one is revoked (it refuses everyone, admin routes too) until an admin opens it on
purpose with `python -m app keys open`; a new key closes it again."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ROOT, ServerProcess, make_key
from tests.eventually import eventually

NO_LIVE_KEY = "every API key is revoked"  # the server's log line once it has seen that
# What an attacker would try first on a server that just lost its last key.
PROBES = [
    ("GET", "/v1/models"),
    ("GET", "/slots"),
    ("GET", "/metrics"),
    ("POST", "/cache/reset"),
    ("POST", "/slots/0?action=erase"),
    ("POST", "/v1/chat/completions"),
]


def keys_cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "keys", *args, "--data-dir", str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("keys")


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    """Database keys only (no --api-key): an admin key made before the server starts."""
    make_key(data, "ops", "--admin")
    args = ("-np", "1", "-c", "512", "--data-dir", str(data), "--doc-prefill-tokens", "0")
    with ServerProcess(*args) as srv:
        yield srv


def keyless(server: ServerProcess, method: str, path: str) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    return httpx.request(method, server.base_url + path, json=body, timeout=30)


def assert_refused(r: httpx.Response, path: str) -> None:
    assert r.status_code == 401, (path, r.status_code, r.text)
    error = r.json()["error"]
    assert error["message"].startswith("this server needs an API key"), error
    assert r.headers["www-authenticate"] == "Bearer"


def test_revoking_the_last_key_keeps_the_server_closed_until_an_admin_opens_it(
    server: ServerProcess, data: Path
):
    assert_refused(keyless(server, "GET", "/v1/models"), "/v1/models")
    revoked = keys_cli(data, "revoke", "ops")
    assert revoked.returncode == 0 and "no live key left" in revoked.stdout

    def settled() -> httpx.Response | None:
        """The server has seen the revocation (it logs that every key is revoked), or it
        opened (what an attacker waits for)."""
        r = keyless(server, "GET", "/v1/models")
        return r if r.status_code != 401 or NO_LIVE_KEY in server.log(100_000) else None

    assert_refused(eventually(settled, "the server to see the last key revoked"), "/v1/models")
    for method, path in PROBES:
        assert_refused(keyless(server, method, path), path)
    assert httpx.get(server.base_url + "/health", timeout=30).status_code == 200

    # The admin's deliberate act opens it: every client is served without a key.
    opened = keys_cli(data, "open")
    assert opened.returncode == 0, opened.stderr
    assert "removed" in opened.stdout and "open" in opened.stdout
    eventually(
        lambda: keyless(server, "GET", "/v1/models").status_code == 200,
        "the opened server to serve without a key",
    )
    # A new key closes it again.
    key = make_key(data, "ops2")
    eventually(
        lambda: keyless(server, "GET", "/v1/models").status_code == 401,
        "the server to need the new key",
    )
    auth = {"Authorization": f"Bearer {key}"}
    assert httpx.get(server.base_url + "/v1/models", headers=auth, timeout=30).status_code == 200


def test_opening_is_refused_while_a_key_is_live(tmp_path: Path):
    make_key(tmp_path, "alice")
    refused = keys_cli(tmp_path, "open")
    assert refused.returncode == 1
    assert "revoke them first" in refused.stderr
    listed = keys_cli(tmp_path, "list").stdout
    assert "alice" in listed and "live" in listed


def test_a_server_started_on_revoked_keys_refuses_its_first_request(tmp_path: Path):
    make_key(tmp_path, "gone")
    assert keys_cli(tmp_path, "revoke", "gone").returncode == 0
    args = ("-np", "1", "-c", "512", "--data-dir", str(tmp_path), "--doc-prefill-tokens", "0")
    with ServerProcess(*args) as srv:
        for method, path in PROBES:
            assert_refused(keyless(srv, method, path), path)
        assert NO_LIVE_KEY in srv.log(100_000)
