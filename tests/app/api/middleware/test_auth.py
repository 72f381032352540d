"""API keys through a real server: who may call what, keys stored hashed, revocation, the
per-key bound on requests at once, and an open server that says so."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import subprocess
import sys

import httpx
import pytest

import app.api.middleware.auth as auth_module
from app.api.middleware.auth import Auth
from app.config import Settings
from app.db.key_store import KeysState
from app.server import _say_if_open
from bench.lib.server_process import ROOT, make_key
from tests.app.api.keyed_server import KeyedServer
from tests.eventually import eventually

CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


def test_every_route_but_health_and_the_ui_needs_a_key(keyed: KeyedServer):
    assert httpx.get(keyed.url + "/health").status_code == 200
    assert httpx.get(keyed.url + "/").status_code == 200  # the web UI's files
    for method, path in [
        ("GET", "/v1/models"),
        ("GET", "/v1/sessions"),
        ("GET", "/slots"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/tokenize"),
        ("GET", "/props"),  # as llama-server: only /health and the UI are open
        ("GET", "/models"),
        ("GET", "/openapi.json"),
    ]:
        r = httpx.request(method, keyed.url + path, json={})
        assert r.status_code == 401, path
        assert r.json()["error"]["type"] == "authentication_error"
        assert r.headers["www-authenticate"] == "Bearer"
    bad = httpx.get(keyed.url + "/v1/models", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401
    assert httpx.get(keyed.url + "/v1/models", headers=keyed.auth("alice")).status_code == 200
    r = httpx.post(keyed.url + "/v1/chat/completions", json=CHAT, headers=keyed.auth("static"))
    assert r.status_code == 200  # llama-server's --api-key


def test_server_state_routes_need_an_admin_key(keyed: KeyedServer):
    for path in ("/metrics", "/slots", "/cache"):
        assert httpx.get(keyed.url + path, headers=keyed.auth("alice")).status_code == 403
        assert httpx.get(keyed.url + path, headers=keyed.auth("root")).status_code == 200
        assert httpx.get(keyed.url + path, headers=keyed.auth("static")).status_code == 200
    erase = httpx.post(keyed.url + "/slots/0?action=erase", headers=keyed.auth("bob"))
    assert erase.status_code == 403


def test_keys_are_stored_hashed_and_revoked_keys_stop_working(keyed: KeyedServer):
    key = make_key(keyed.data_dir, "carol")
    assert httpx.get(
        keyed.url + "/v1/models", headers={"Authorization": f"Bearer {key}"}
    ).is_success
    db = (keyed.data_dir / "kvchat.db").read_bytes()
    for wal in keyed.data_dir.glob("kvchat.db-wal"):
        db += wal.read_bytes()
    assert key.encode() not in db
    assert hashlib.sha256(key.encode()).hexdigest().encode() in db
    listed = subprocess.run(
        [sys.executable, "-m", "app", "keys", "list", "--data-dir", str(keyed.data_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "carol" in listed and key not in listed
    subprocess.run(
        [sys.executable, "-m", "app", "keys", "revoke", "carol", "--data-dir", str(keyed.data_dir)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    r = httpx.get(keyed.url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 401


def test_a_key_over_its_concurrent_limit_gets_429_with_retry_after(keyed: KeyedServer):
    # Long enough that it is still generating when the second request comes, however slow.
    body = {"prompt": "Count:", "ignore_eos": True, "max_tokens": 1000, "stream": True}
    url = keyed.url + "/v1/completions"
    with httpx.stream("POST", url, json=body, headers=keyed.auth("alice"), timeout=120) as r:
        lines = r.iter_lines()  # kept: a closed iterator would close the response
        for line in lines:
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["text"]:
                break  # alice's first request is generating now
        second = httpx.post(
            url, json={"prompt": "Hi", "max_tokens": 1}, headers=keyed.auth("alice")
        )
        assert second.status_code == 429
        assert int(second.headers["retry-after"]) >= 1
        assert second.json()["error"]["type"] == "rate_limit_error"
        other = httpx.post(url, json={"prompt": "Hi", "max_tokens": 1}, headers=keyed.auth("bob"))
        assert other.status_code == 200  # the limit is per key

    # The first ends once the server sees the client gone: then alice may send again.
    def alice_may_send() -> httpx.Response:
        after = httpx.post(url, json={"prompt": "Hi", "max_tokens": 1}, headers=keyed.auth("alice"))
        assert after.status_code != 429, after.text
        return after

    assert eventually(alice_may_send, "alice's first request to end").status_code == 200


@pytest.mark.parametrize(
    ("host", "level", "words"),
    [
        ("127.0.0.1", logging.WARNING, "no API keys"),
        ("0.0.0.0", logging.CRITICAL, "NO API KEYS"),
    ],
)
def test_an_open_server_says_so_loudly_off_loopback(host, level, words, caplog, tmp_path):
    class NoKeys:
        def state(self) -> KeysState:
            return KeysState(keyed=False, live=False)

    with caplog.at_level(logging.INFO, logger="app.server"):
        _say_if_open(Settings(host=host, data_dir=str(tmp_path)), NoKeys())  # type: ignore[arg-type]
    assert [r for r in caplog.records if r.levelno == level and words in r.getMessage()]


def test_a_key_created_while_open_closes_the_server_without_a_query_on_the_request_path(
    monkeypatch: pytest.MonkeyPatch,
):
    class Keys:
        live = False
        queries = 0

        def state(self) -> KeysState:
            Keys.queries += 1
            return KeysState(keyed=Keys.live, live=Keys.live)

    async def scenario() -> list[bool]:
        auth = Auth(lambda *a: None, None, 0)  # type: ignore[arg-type]
        keys = Keys()
        # White-box: the cached answer and its recheck in the background.
        seen = [await auth._keys_configured(keys)]  # noqa: SLF001 (the first answer is waited for)
        Keys.live = True  # a key is created
        seen.append(await auth._keys_configured(keys))  # still fresh: no query  # noqa: SLF001
        monkeypatch.setattr(auth_module, "KEYS_RECHECK_S", 0.0)
        seen.append(await auth._keys_configured(keys))  # noqa: SLF001 (stale: rechecks beside)
        await auth._recheck  # noqa: SLF001
        monkeypatch.setattr(auth_module, "KEYS_RECHECK_S", 60.0)
        seen.append(await auth._keys_configured(keys))  # noqa: SLF001 (white-box)
        return seen

    assert asyncio.run(scenario()) == [False, False, False, True]
    assert Keys.queries == 2  # the first, and the recheck the stale answer started
