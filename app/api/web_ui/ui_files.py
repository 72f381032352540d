"""The built web UI (frontend/dist, made by `make frontend`) as static files.

index.html names the current hashed bundles, so it is always revalidated (no-cache); the hashed
files under assets/ never change under their name and are cached for a year (immutable).
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

log = logging.getLogger(__name__)

UI_DIR = Path(__file__).resolve().parents[3] / "frontend" / "dist"
IMMUTABLE = "public, max-age=31536000, immutable"


class UIFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        if path == "favicon.ico":  # browsers ask for it whatever the page links
            path = "favicon.svg"
        response = await super().get_response(path, scope)
        if response.status_code < 400:
            hashed = path.startswith("assets/")
            response.headers["Cache-Control"] = IMMUTABLE if hashed else "no-cache"
        return response


def built_ui(directory: Path = UI_DIR) -> UIFiles | None:
    """The UI's files, or None (and a log line: the server then serves the API only) when the
    UI is not built."""
    if not (directory / "index.html").is_file():
        log.warning(
            "web UI not built (%s missing): serving the API only; `make frontend` builds it",
            directory / "index.html",
        )
        return None
    return UIFiles(directory=directory, html=True)
