"""`JsonBodies`: a body sent without a JSON content type is read as JSON, as llama-server reads
every body.

`curl -d '{...}'` sends `application/x-www-form-urlencoded`, and some clients send no content
type at all; llama-server parses the body as JSON either way, so a user switching from it must
not get a 400 for a header. Only those two cases are rewritten: multipart uploads, raw media
bytes (with their image type) and explicit JSON pass untouched, and `/cors-proxy` forwards the
client's headers as they came.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

FORM = b"application/x-www-form-urlencoded"
JSON = (b"content-type", b"application/json")
UNTOUCHED_PATHS = ("/cors-proxy",)


def reads_as_json(scope: Scope) -> bool:
    """True when the request's body is sent without a content type, or as a URL-encoded form."""
    if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
        return False
    if scope["path"].startswith(UNTOUCHED_PATHS):
        return False
    types = [v for k, v in scope["headers"] if k == b"content-type"]
    return not types or types[0].split(b";", 1)[0].strip().lower() == FORM


class JsonBodies:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if reads_as_json(scope):
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope = {**scope, "headers": [*headers, JSON]}
        await self.app(scope, receive, send)
