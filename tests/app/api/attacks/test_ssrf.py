"""Server-side request forgery, as a key holder of a multi-tenant deployment would try it:
`/cors-proxy` (--ui-mcp-proxy) and remote image URLs (--allow-remote-images) reach public
addresses only (checked after the name is looked up, and on every redirect) unless
--fetch-allow-hosts names the host; a proxied answer cannot run as a page of the server's origin;
errors do not tell the remote status or body.

No test sends traffic off this machine. The refused targets (169.254.169.254, 10.0.0.1) are
refused before any connection is tried; the one HTTP server these tests run listens on
127.0.0.1 and plays both the target and, for a server that would honour HTTP_PROXY (as the code
before this check did), the proxy every request would then go to: such a request lands here and
fails the test instead of leaving the machine.
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest
from PIL import Image

from bench.lib.server_process import ROOT, ServerProcess, free_port

REFUSED_HOSTS = ["169.254.169.254", "10.0.0.1", "[::ffff:127.0.0.1]"]  # and the target's own
SECRET = b"internal secret 7f3a"


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (10, 200, 30)).save(buf, "PNG")
    return buf.getvalue()


class Target(BaseHTTPRequestHandler):
    """A page, JSON, an image, a 404 with a body, redirects elsewhere; by path, also when asked
    as a proxy (an absolute URL in the request line). Every request is counted."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        path = urlsplit(self.path).path
        port = self.server.server_address[1]
        if path == "/page":
            self._send(200, "text/html", b"<script>fetch('/v1/sessions')</script>", cookie=True)
        elif path == "/json":
            self._send(200, "application/json", b'{"jsonrpc": "2.0", "id": 1, "result": {}}')
        elif path == "/events":
            self._send(200, "text/event-stream", b"event: message\ndata: {}\n\n")
        elif path == "/img.png":
            self._send(200, "image/png", png())
        elif path.startswith("/redirect/"):
            to = {
                "loopback": f"http://127.0.0.1:{port}/json",
                "private": "http://10.0.0.1/json",
                "metadata": "http://169.254.169.254/latest/meta-data/",
            }[path.removeprefix("/redirect/")]
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, "text/plain", SECRET)

    def _send(self, status: int, ctype: str, body: bytes, cookie: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if cookie:
            self.send_header("Set-Cookie", "session=attacker; Path=/")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def target() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Target)
    httpd.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    return str(out)


def trap_env(target: ThreadingHTTPServer, **extra: str) -> dict[str, str]:
    """Any request a server sends through an HTTP proxy goes to the target: never off the box."""
    proxy = f"http://127.0.0.1:{target.server_address[1]}"
    names = ("http_proxy", "https_proxy", "all_proxy")
    env = {n: proxy for name in names for n in (name, name.upper())}
    return {**env, "no_proxy": "", "NO_PROXY": "", **extra}


def serve(mmproj: str, target: ThreadingHTTPServer, **env: str) -> ServerProcess:
    args = ("-np", "1", "-c", "2048", "--mmproj", mmproj, "--ui-mcp-proxy")
    return ServerProcess(*args, "--allow-remote-images", env=trap_env(target, **env))


@pytest.fixture(scope="module")
def closed(mmproj: str, target: ThreadingHTTPServer) -> Iterator[ServerProcess]:
    """Public addresses only (the default)."""
    with serve(mmproj, target) as srv:
        yield srv


@pytest.fixture(scope="module")
def named(mmproj: str, target: ThreadingHTTPServer) -> Iterator[ServerProcess]:
    """The operator names the host `localhost` (an MCP server on this machine, say); its
    environment variable, which a server without the setting ignores."""
    with serve(mmproj, target, KVCHAT_FETCH_ALLOW_HOSTS="localhost") as srv:
        yield srv


def proxied(srv: ServerProcess, url: str) -> httpx.Response:
    return httpx.get(srv.base_url + "/cors-proxy", params={"url": url}, timeout=30)


def with_image(srv: ServerProcess, url: str) -> httpx.Response:
    parts = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What?"}]
    body = {"messages": [{"role": "user", "content": parts}], "max_tokens": 2}
    return httpx.post(srv.base_url + "/v1/chat/completions", json=body, timeout=60)


def refused(r: httpx.Response, param: str) -> str:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    assert "public addresses" in error["message"], error
    return error["message"]


def own_hosts(target: ThreadingHTTPServer) -> list[str]:
    port = target.server_address[1]
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", *REFUSED_HOSTS]


@pytest.mark.parametrize("which", range(6))
def test_the_proxy_refuses_loopback_link_local_and_private_targets(
    closed: ServerProcess, target: ThreadingHTTPServer, which: int
):
    host = own_hosts(target)[which]
    before = len(target.seen)  # type: ignore[attr-defined]
    message = refused(proxied(closed, f"http://{host}/json"), "url")
    if host.startswith("localhost"):  # what the name resolved to is not told
        assert "127.0.0.1" not in message and "::1" not in message
    assert len(target.seen) == before, "the refused request was sent"  # type: ignore[attr-defined]


@pytest.mark.parametrize("to", ["loopback", "private", "metadata"])
def test_a_redirect_to_a_refused_address_is_refused(
    named: ServerProcess, target: ThreadingHTTPServer, to: str
):
    port = target.server_address[1]
    assert proxied(named, f"http://localhost:{port}/json").status_code == 200  # named: reached
    refused(proxied(named, f"http://localhost:{port}/redirect/{to}"), "url")


def test_a_proxied_page_cannot_run_in_the_servers_origin(
    named: ServerProcess, target: ThreadingHTTPServer
):
    port = target.server_address[1]
    r = proxied(named, f"http://localhost:{port}/page")
    assert r.status_code == 200
    assert "set-cookie" not in r.headers
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-security-policy"].startswith("sandbox")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-disposition"] == "attachment"
    # What the web UI's MCP client reads keeps its type.
    assert proxied(named, f"http://localhost:{port}/json").headers["content-type"] == (
        "application/json"
    )
    events = proxied(named, f"http://localhost:{port}/events")
    assert events.headers["content-type"] == "text/event-stream"
    assert events.text == "event: message\ndata: {}\n\n"


def test_an_unreachable_target_is_a_502_that_tells_nothing_of_the_network(named: ServerProcess):
    r = proxied(named, f"http://localhost:{free_port()}/mcp")  # nothing listens there
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert (error["param"], error["message"]) == ("url", "the target could not be reached")


@pytest.mark.parametrize("which", range(6))
def test_remote_images_from_refused_addresses_are_refused(
    closed: ServerProcess, target: ThreadingHTTPServer, which: int
):
    host = own_hosts(target)[which]
    before = len(target.seen)  # type: ignore[attr-defined]
    refused(with_image(closed, f"http://{host}/img.png"), "messages.0.content")
    assert len(target.seen) == before, "the refused request was sent"  # type: ignore[attr-defined]


def test_a_remote_images_error_does_not_tell_the_remote_status_or_body(
    named: ServerProcess, target: ThreadingHTTPServer
):
    port = target.server_address[1]
    assert with_image(named, f"http://localhost:{port}/img.png").status_code == 200
    r = with_image(named, f"http://localhost:{port}/missing.png")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "messages.0.content"
    assert "could not be fetched" in error["message"]
    assert "404" not in error["message"] and SECRET.decode() not in r.text
