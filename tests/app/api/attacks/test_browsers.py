"""Attacks from a web page in the user's browser on a server without keys on localhost: a page
of another site posts forms (no CORS preflight) that would generate, erase a slot or reset the
cache; a page behind DNS rebinding calls the server as its own origin; a prompt-injected answer
shows a remote image that carries the conversation away (the UI's Content-Security-Policy; the
same attack through chromium: tests/frontend/test_csp.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess

EVIL = "http://evil.example"
CHAT = {"messages": [{"role": "user", "content": "Remember the word plum."}], "max_tokens": 1}
FORM = "application/x-www-form-urlencoded"
# What a page can send without a preflight: the three "simple" content types.
SIMPLE = [FORM, "text/plain", "multipart/form-data; boundary=x"]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    """No key, on 127.0.0.1 (ServerProcess's address), --cors-origins unset: localhost."""
    with ServerProcess("-np", "1", "-c", "1024", "--doc-prefill-tokens", "0") as srv:
        yield srv


def post(server: ServerProcess, path: str, headers: dict[str, str], body: dict | None = None):
    content = json.dumps(body if body is not None else {})
    return httpx.post(server.base_url + path, content=content, headers=headers, timeout=120)


def assert_refused(r: httpx.Response, param: str) -> None:
    assert r.status_code == 403, r.text
    body = r.json()["error"]  # llama-server's shape on /completion: no param, the status as code
    assert body["type"] == "permission_error" and body.get("param", param) == param, body
    assert param.lower() in body["message"].lower(), body
    assert "access-control-allow-origin" not in r.headers  # the page may not even read it


def generations(server: ServerProcess) -> float:
    """Generation requests the server has counted, however they ended (/metrics)."""
    text = httpx.get(server.base_url + "/metrics", timeout=30).text
    lines = [line for line in text.splitlines() if line.startswith("kvchat_requests_total{")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


def cached_tokens(server: ServerProcess) -> int:
    r = post(server, "/v1/chat/completions", {"Content-Type": "application/json"}, CHAT)
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


@pytest.mark.parametrize("content_type", SIMPLE)
def test_a_cross_site_simple_post_runs_nothing(server: ServerProcess, content_type: str):
    cached_tokens(server)
    assert cached_tokens(server) > 0  # the prompt is cached: a reset or an erase would show
    before = generations(server)
    page = {"Origin": EVIL, "Content-Type": content_type}
    for path in ("/cache/reset", "/slots/0?action=erase", "/v1/chat/completions", "/completion"):
        assert_refused(post(server, path, page, CHAT), "Origin")
    assert generations(server) == before  # nothing generated
    assert cached_tokens(server) > 0  # nothing reset or erased


@pytest.mark.parametrize(
    "origin", ["null", "http://localhost.evil.example", "https://127.0.0.1.nip.io"]
)
def test_an_opaque_or_lookalike_origin_is_refused(server: ServerProcess, origin: str):
    assert_refused(post(server, "/cache/reset", {"Origin": origin, "Content-Type": FORM}), "Origin")


def test_the_servers_own_page_local_pages_and_clients_without_origin_are_served(
    server: ServerProcess,
):
    port = server.base_url.rsplit(":", 1)[1]
    for origin in (server.base_url, f"http://localhost:{port}", "http://localhost:5173", None):
        headers = {"Content-Type": FORM} | ({"Origin": origin} if origin else {})
        r = post(server, "/v1/chat/completions", headers, CHAT)  # curl -d: a form, read as JSON
        assert r.status_code == 200, (origin, r.text)


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "", "a b"]
)
def test_dns_rebinding_a_foreign_host_is_refused(server: ServerProcess, host: str):
    """A rebound page is the server's own origin to the browser: only its Host tells it apart."""
    same_origin = f"http://{host}"
    headers = {"Host": host, "Origin": same_origin, "Content-Type": "application/json"}
    assert_refused(post(server, "/cache/reset", headers), "Host")
    assert_refused(post(server, "/v1/chat/completions", headers, CHAT), "Host")
    r = httpx.get(server.base_url + "/v1/sessions", headers={"Host": host}, timeout=30)
    assert_refused(r, "Host")
    native = post(server, "/completion", headers, {"prompt": "Hi", "n_predict": 1})
    assert native.status_code == 403 and "--allowed-hosts" in native.json()["error"]["message"]


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST:1234", "127.0.0.1", "[::1]:80", "app.localhost"]
)
def test_local_host_names_are_served(server: ServerProcess, host: str):
    r = httpx.get(server.base_url + "/v1/models", headers={"Host": host}, timeout=30)
    assert r.status_code == 200, r.text


def test_the_ui_forbids_remote_images_and_scripts(server: ServerProcess):
    page = httpx.get(server.base_url + "/", timeout=30)
    assert page.status_code == 200 and "<html" in page.text
    csp = {
        d.split()[0]: d.split()[1:]
        for d in page.headers["content-security-policy"].split(";")
        if d.strip()
    }
    assert csp["script-src"] == ["'self'"]
    assert csp["img-src"] == ["'self'", "data:", "blob:"]  # no remote image: no way out
    assert csp["connect-src"] == ["'self'"] and csp["default-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'none'"]
