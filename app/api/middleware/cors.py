"""`Cors`: llama-server's CORS, answered before anything else sees a request (its pre-routing
handler), so before the key check.

Every answer gets `Access-Control-Allow-Origin` as `CorsPolicy` decides. An OPTIONS request (a
browser's preflight, which carries no key) is answered here, on any path: 200, an empty body,
and the allowed credentials, methods and headers (--cors-credentials, --cors-methods,
--cors-headers).

The headers are spelled as llama-server spells them (clients that read them case-sensitively
find them; uvicorn sends names as given).

The allowed origin (--cors-origins), as llama-server decides it:
- `*` with credentials (the default): the request's own Origin, reflected;
- `*` without credentials: `*`;
- `localhost`: the request's Origin when its host is localhost, 127.0.0.1 or ::1 (http or https,
  any port), else none;
- one origin: that origin, whatever the request's (the browser compares);
- several, comma-separated (ours: llama-server would send the list, which no browser takes): the
  request's Origin when it is one of them, else none.
Unset: `*` when the server needs a key (--api-key), llama-server's default; `localhost` when it
has none (llama-server's own choice once it serves tools): an open server's sessions and
documents are not for any page a browser on this machine opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def is_localhost(origin: str) -> bool:
    """True if the origin's host is a loopback name (llama-server's origin_is_localhost)."""
    try:
        url = urlsplit(origin)
        url.port  # noqa: B018 (reading it checks it: a bad port is no localhost origin)
    except ValueError:
        return False
    return url.scheme in ("http", "https") and url.hostname in LOCAL_HOSTS


@dataclass(slots=True, frozen=True)
class CorsPolicy:
    origins: str = "*"
    credentials: bool = True
    methods: str = "GET, POST, DELETE, OPTIONS"
    headers: str = "*"

    def allowed_origin(self, origin: str) -> str | None:
        """The Access-Control-Allow-Origin for a request from `origin` ("" if none); None: no
        such header."""
        if self.origins == "*" and self.credentials:
            return origin or None
        if self.origins == "localhost":
            return origin if origin and is_localhost(origin) else None
        listed = [o.strip() for o in self.origins.split(",") if o.strip()]
        if len(listed) > 1:
            return origin if origin in listed else None
        return self.origins


def default_origins(origins: str | None, api_key: str | None) -> str:
    """--cors-origins as given, or the default for the server's keys (see above)."""
    if origins:
        return origins
    return "*" if api_key else "localhost"


class Cors:
    def __init__(self, app: ASGIApp, policy: CorsPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        allowed = self.policy.allowed_origin(origin)
        if scope["method"] == "OPTIONS":
            await self._preflight(send, allowed)
            return
        if allowed is None:
            await self.app(scope, receive, send)
            return
        extra = [(b"Access-Control-Allow-Origin", allowed.encode("latin-1"))]
        if allowed == origin:  # it depends on the request: caches must keep answers apart
            extra.append((b"Vary", b"Origin"))

        async def send_allowed(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() != b"access-control-allow-origin"
                ]
                message = {**message, "headers": kept + extra}
            await send(message)

        await self.app(scope, receive, send_allowed)

    async def _preflight(self, send: Send, allowed: str | None) -> None:
        policy = self.policy
        headers = [
            (b"Access-Control-Allow-Credentials", b"true" if policy.credentials else b"false"),
            (b"Access-Control-Allow-Methods", policy.methods.encode("latin-1")),
            (b"Access-Control-Allow-Headers", policy.headers.encode("latin-1")),
            (b"Content-Type", b"text/html"),
            (b"Content-Length", b"0"),
        ]
        if allowed is not None:
            headers.insert(0, (b"Access-Control-Allow-Origin", allowed.encode("latin-1")))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return ""
