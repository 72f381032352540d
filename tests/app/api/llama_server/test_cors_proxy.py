"""llama-server's /cors-proxy through a real server: off (403) unless --ui-mcp-proxy, behind the
API key, and only the headers the caller names for the target reach it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from tests.app.api.keyed_server import STATIC_KEY, KeyedServer


class Capture(BaseHTTPRequestHandler):
    """Answers every request with what it was sent, and 204 to a POST to /empty."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.seen = {k.lower(): v for k, v in self.headers.items()}  # type: ignore[attr-defined]
        body = b"captured"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Access-Control-Allow-Origin", "http://target.example")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length", "0"))
        self.server.body = self.rfile.read(n)  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def target() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def proxy() -> Iterator[ServerProcess]:
    args = ("-np", "1", "-c", "512", "--api-key", STATIC_KEY, "--ui-mcp-proxy")
    # The test's target is on loopback, which the proxy reaches only when told it may.
    with ServerProcess(*args, "--fetch-allow-hosts", "127.0.0.1") as srv:
        yield srv


def _url(target: ThreadingHTTPServer, path: str = "/capture") -> str:
    return f"http://127.0.0.1:{target.server_address[1]}{path}"


def test_only_headers_named_for_the_target_reach_it(
    proxy: ServerProcess, target: ThreadingHTTPServer
):
    headers = {
        "Authorization": f"Bearer {STATIC_KEY}",
        "Proxy-Authorization": "Basic secret",
        "X-Api-Key": STATIC_KEY,
        "Cookie": "session=secret",
        "X-Llama-Server-Proxy-Header-Accept": "application/json",
        "X-Llama-Server-Proxy-Header-Authorization": "Bearer explicit",
    }
    r = httpx.get(proxy.base_url + "/cors-proxy", params={"url": _url(target)}, headers=headers)
    assert r.status_code == 200 and r.text == "captured"
    seen = target.seen  # type: ignore[attr-defined]
    assert seen["accept"] == "application/json"
    assert seen["authorization"] == "Bearer explicit"
    assert not {"proxy-authorization", "x-api-key", "cookie"} & seen.keys()
    # the target's CORS headers stay behind: this server answers with its own
    assert "access-control-allow-origin" not in r.headers


def test_a_post_goes_with_its_body_and_an_empty_answer_comes_back(
    proxy: ServerProcess, target: ThreadingHTTPServer
):
    auth = {"Authorization": f"Bearer {STATIC_KEY}"}
    url = proxy.base_url + "/cors-proxy"
    body = b'{"a":1}'
    r = httpx.post(url, params={"url": _url(target, "/empty")}, content=body, headers=auth)
    assert r.status_code == 204 and r.content == b""
    assert target.body == body  # type: ignore[attr-defined]


def test_the_proxy_needs_the_key(proxy: ServerProcess, target: ThreadingHTTPServer):
    r = httpx.get(proxy.base_url + "/cors-proxy", params={"url": _url(target)})
    assert r.status_code == 401


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/x", "http:///nohost", "http://user:pw@127.0.0.1/", "not a url"]
)
def test_a_bad_target_is_a_clear_400(proxy: ServerProcess, url: str):
    auth = {"Authorization": f"Bearer {STATIC_KEY}"}
    r = httpx.get(proxy.base_url + "/cors-proxy", params={"url": url}, headers=auth)
    assert r.status_code == 400 and r.json()["error"]["param"] == "url"


def test_without_the_flag_it_is_off(keyed: KeyedServer):
    params = {"url": "http://127.0.0.1/"}
    r = httpx.get(keyed.url + "/cors-proxy", params=params, headers=keyed.auth("static"))
    assert r.status_code == 403 and r.json()["error"]["type"] == "feature_disabled"
