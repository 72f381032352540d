"""--cors-origins through a real browser: a page on another origin calls the API (llama-server's
CORS): the preflight passes without a key, the call itself needs one; an origin not listed is
refused by the browser."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page

from bench.lib.server_process import ServerProcess

KEY = "cors-test-key"


class Blank(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = b"<html><body></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def origins() -> Iterator[tuple[str, str]]:
    """Two pages of other origins on 127.0.0.1 (a real loopback origin: Chromium refuses a
    public page's calls to a loopback address whatever CORS says)."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Blank) for _ in range(2)]
    for httpd in servers:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield tuple(f"http://127.0.0.1:{h.server_address[1]}" for h in servers)  # type: ignore[misc]
    for httpd in servers:
        httpd.shutdown()


@pytest.fixture(scope="module")
def server(origins: tuple[str, str]) -> Iterator[ServerProcess]:
    args = ("-np", "1", "-c", "1024", "--api-key", KEY, "--cors-origins", origins[0])
    with ServerProcess(*args) as srv:
        yield srv


def call_from(page: Page, origin: str, url: str, key: str | None) -> dict:
    """Open a blank page of `origin`, and fetch `url` from it with a JSON POST."""
    page.goto(f"{origin}/")
    script = """async ([url, key]) => {
        const headers = {"Content-Type": "application/json"};
        if (key) headers["Authorization"] = "Bearer " + key;
        const body = JSON.stringify({messages: [{role: "user", content: "hi"}], max_tokens: 2});
        try {
            const r = await fetch(url, {method: "POST", headers, body});
            return {status: r.status, body: await r.text()};
        } catch (e) {
            return {status: 0, body: String(e)};
        }
    }"""
    return page.evaluate(script, [url, key])


def test_a_listed_origin_calls_with_a_key(
    page: Page, server: ServerProcess, origins: tuple[str, str]
):
    url = server.base_url + "/v1/chat/completions"
    # The JSON content type makes the browser send a preflight (OPTIONS) first, without a key.
    reply = call_from(page, origins[0], url, KEY)
    assert reply["status"] == 200, reply
    assert '"choices"' in reply["body"]
    unauthorized = call_from(page, origins[0], url, None)
    assert unauthorized["status"] == 401  # the call itself still needs the key


def test_an_origin_not_listed_is_refused_by_the_browser(
    page: Page, server: ServerProcess, origins: tuple[str, str]
):
    url = server.base_url + "/v1/chat/completions"
    assert call_from(page, origins[0], url, KEY)["status"] == 200  # the listed one may
    reply = call_from(page, origins[1], url, KEY)
    assert reply["status"] == 0 and "Failed to fetch" in reply["body"]
