"""The web chat's static files, served only where no API route answers.

They are not mounted at `/`: a mount there would take every path and method, so an unknown
API path got the static app's 405 and a wrong method on a known route its 404. Instead a GET
or HEAD that no route matches looks for a file here; anything else gets the JSON 404 or 405.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from app.api.web_ui.ui_files import UI_DIR, built_ui

# Paths of the API: an unknown one is an API error (JSON), never a page of the UI.
API_PREFIXES = ("/v1/", "/slots", "/cache", "/metrics", "/health", "/cors-proxy")


def install_frontend(app: FastAPI, directory: Path = UI_DIR) -> None:
    """Serve the built UI (app/api/web_ui/ui_files.py: cache headers, favicon); none when not
    built."""
    app.state.frontend = built_ui(directory)


async def frontend_page(request: Request) -> Response | None:
    """The UI's file for this GET/HEAD, or None (no UI, an API path, or no such file)."""
    static: StaticFiles | None = getattr(request.app.state, "frontend", None)
    path = request.url.path
    if static is None or request.method not in ("GET", "HEAD") or path.startswith(API_PREFIXES):
        return None
    try:
        return await static.get_response(static.get_path(request.scope), request.scope)
    except HTTPException:
        return None
