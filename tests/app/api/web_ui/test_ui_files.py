"""The built UI's static files: cache headers, the favicon, and an API-only server when the UI
is not built."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.errors import install_error_handlers
from app.api.web_ui.frontend import install_frontend
from app.api.web_ui.ui_files import IMMUTABLE


def app_with_ui(directory: Path) -> tuple[FastAPI, bool]:
    """As the server does it: the UI answers GETs that no route takes."""
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    install_frontend(app, directory)
    return app, app.state.frontend is not None


def test_index_is_revalidated_and_hashed_assets_are_immutable(tmp_path: Path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<script src='assets/app-ABC.js'></script>")
    (tmp_path / "assets" / "app-ABC.js").write_text("1")
    (tmp_path / "favicon.svg").write_text("<svg/>")
    app, mounted = app_with_ui(tmp_path)
    assert mounted
    client = TestClient(app)
    assert client.get("/").headers["cache-control"] == "no-cache"
    assert client.get("/index.html").headers["cache-control"] == "no-cache"
    assert client.get("/assets/app-ABC.js").headers["cache-control"] == IMMUTABLE
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
    missing = client.get("/assets/nope.js")
    assert missing.status_code == 404 and "cache-control" not in missing.headers
    assert client.get("/health").json() == {"status": "ok"}


def test_without_a_built_ui_the_api_is_served_and_a_log_line_says_so(tmp_path: Path, caplog):
    with caplog.at_level(logging.WARNING, logger="app.api.web_ui.ui_files"):
        app, mounted = app_with_ui(tmp_path / "dist")
    assert not mounted
    assert "web UI not built" in caplog.text and "make frontend" in caplog.text
    client = TestClient(app)
    assert client.get("/health").status_code == 200
    assert client.get("/").status_code == 404
