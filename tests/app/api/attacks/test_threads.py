"""Worker threads, as an attacker of a multi-tenant deployment would exhaust them: work that
waits (remote images trickling in, PDFs waiting for PDFium) must never hold the threads that API
key lookups and database calls need, so the server keeps answering every other client.

- Remote images from a server that sends a byte every second, forever: each fetch ends at
  --fetch-timeout with a clear 400, and holds no thread meanwhile; keyed requests are answered.
- Many PDF uploads at once wait in the parse pool, whose queue is bounded: past it an upload is
  refused at once (503 + Retry-After, sent again later it is stored), and keyed requests are
  answered meanwhile.

The settings go in as environment variables, which a server without them ignores.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ROOT, ServerProcess, make_key
from tests.eventually import eventually
from tests.rag.pdfs import make_pdf

# More requests than asyncio's default pool has threads on any machine (at most 32).
N_SLOW = 40
HANG_GUARD_S = 30.0  # a keyed request answered within this did not wait for the others


class Trickle(BaseHTTPRequestHandler):
    """An image server that sends its headers, then a byte a second until told to stop."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.fetches += 1  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        stop: threading.Event = self.server.stop  # type: ignore[attr-defined]
        try:
            while not stop.wait(1.0):
                self.wfile.write(b"\x89")
                self.wfile.flush()
        except OSError:  # the fetch gave up
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def trickle() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    httpd.daemon_threads = True
    httpd.stop = threading.Event()  # type: ignore[attr-defined]
    httpd.fetches = 0  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.stop.set()  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    return str(out)


def keyed_server(data: Path, *args: str, env: dict[str, str]) -> tuple[ServerProcess, dict]:
    """A server whose key is in the database: every request looks it up in a worker thread."""
    key = make_key(data, "tenant")
    srv = ServerProcess("--data-dir", str(data), "-np", "1", "-c", "2048", *args, env=env)
    return srv, {"Authorization": f"Bearer {key}"}


def test_slow_remote_images_hold_no_thread_key_lookups_need(
    tmp_path: Path, trickle: ThreadingHTTPServer, mmproj: str
):
    port = trickle.server_address[1]
    env = {"KVCHAT_FETCH_ALLOW_HOSTS": "127.0.0.1", "KVCHAT_FETCH_TIMEOUT": "3"}
    args = ("--mmproj", mmproj, "--allow-remote-images", "--max-concurrent-per-key", "0")
    srv, auth = keyed_server(tmp_path, *args, env=env)
    parts = [
        {"type": "image_url", "image_url": {"url": f"http://127.0.0.1:{port}/slow.png"}},
        {"type": "text", "text": "What is it?"},
    ]
    body = {"messages": [{"role": "user", "content": parts}], "max_tokens": 2}

    def slow_chat() -> httpx.Response:
        url = srv.base_url + "/v1/chat/completions"
        return httpx.post(url, json=body, headers=auth, timeout=120)

    with srv, ThreadPoolExecutor(N_SLOW) as clients:
        sent = [clients.submit(slow_chat) for _ in range(N_SLOW)]
        try:
            fetching = lambda: trickle.fetches >= 1  # type: ignore[attr-defined]  # noqa: E731
            eventually(fetching, "the images to be fetched", timeout=HANG_GUARD_S)
            # Another client of the same server, while the images trickle in: answered.
            r = httpx.get(srv.base_url + "/v1/sessions", headers=auth, timeout=HANG_GUARD_S)
            assert r.status_code == 200, r.text
        except BaseException:
            trickle.stop.set()  # type: ignore[attr-defined]  # the slow requests end now
            raise
        # Each slow image ends with a clear error at the deadline, not when the server stops.
        for done in sent:
            answer = done.result()
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["param"] == "messages.0.content"
            assert "within 3 s" in error["message"]


def test_pdf_uploads_wait_in_a_bounded_pool_and_key_lookups_go_on(tmp_path: Path):
    env = {"KVCHAT_PARSE_THREADS": "1", "KVCHAT_POOL_QUEUE": "1"}
    # Pages past --doc-max-pages' default: a PDF long enough that PDFium reads it for a while.
    args = ("--max-concurrent-per-key", "0", "--doc-max-pages", "10000")
    srv, auth = keyed_server(tmp_path, *args, env=env)
    pdf = make_pdf([f"page number {i}" for i in range(6000)])  # text: no page for OCR

    with srv, ThreadPoolExecutor(16) as clients:
        r = httpx.post(srv.base_url + "/v1/collections", json={"name": "pdfs"}, headers=auth)
        url = f"{srv.base_url}/v1/collections/{r.json()['id']}/documents"

        def upload() -> httpx.Response:
            files = {"file": ("big.pdf", pdf, "application/pdf")}
            return httpx.post(url, files=files, headers=auth, timeout=120)

        sent = [clients.submit(upload) for _ in range(16)]
        while True:  # keyed requests while the uploads are parsed: answered
            r = httpx.get(srv.base_url + "/v1/sessions", headers=auth, timeout=HANG_GUARD_S)
            assert r.status_code == 200, r.text
            if all(f.done() for f in sent):
                break
        answers = [f.result() for f in sent]
        busy = [a for a in answers if a.status_code == 503]
        assert all(a.status_code in (202, 503) for a in answers), [a.text for a in answers]
        assert busy, "the parse pool's queue held more uploads than its bound"
        for a in busy:
            assert a.headers["retry-after"] and "parsing documents" in a.json()["error"]["message"]
        # Nothing lost: sent again, a refused upload is taken (the same document, once).
        again = upload()
        assert again.status_code == 202, again.text
        listed = httpx.get(url, headers=auth).json()["data"]
        assert len(listed) == 1
