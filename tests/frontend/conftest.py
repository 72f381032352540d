"""Browser tests of the web UI: pytest-playwright driving Debian's chromium (scripts/chromium.sh
installs it; Playwright's own browser download is not used). Screenshots go to
build/screenshots/ for review.

KVCHAT_UI_DIST names another built UI for the tests that serve it themselves (`static_url`, the
API faked): `node frontend/build.mjs DIR` builds one. A real server serves its own frontend/dist."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Page

from bench.lib.server_process import ROOT

CHROMIUM = os.environ.get("KVCHAT_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ROOT / "build" / "screenshots"
UI = Path(os.environ.get("KVCHAT_UI_DIST") or ROOT / "frontend" / "dist") / "index.html"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} not found: scripts/chromium.sh installs it (make test runs it)")
    if not UI.is_file():
        pytest.fail(f"{UI} missing: `make frontend` builds the web UI (make test runs it)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    }


@pytest.fixture
def shot(page: Page) -> Callable[[str], Path]:
    """shot("name") saves a screenshot of the page as build/screenshots/name.png."""

    def take(name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path))
        return path

    return take


@pytest.fixture
def page(page: Page) -> Iterator[Page]:
    """pytest-playwright's page, failing the test on any uncaught error in the page's script."""
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    assert not errors, f"errors in the page: {errors}"


@pytest.fixture(scope="module")
def static_url() -> Iterator[str]:
    """The built page from a plain static file server (the API faked with page.route)."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(UI.parent))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
