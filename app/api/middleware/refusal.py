"""`refuse`: a request turned away by a middleware, before any route sees it, answered in the
shape of the API its path speaks (Anthropic's on /v1/messages, llama-server's on its native
routes, OpenAI's elsewhere), so a client reads it as it reads the route's own errors."""

from __future__ import annotations

import json

from starlette.types import Scope, Send

from app.api.anthropic.anthropic_errors import anthropic_error_body, speaks_anthropic
from app.api.errors import error_body
from app.api.llama_server.native_errors import native_error_body, speaks_native


async def refuse(
    send: Send,
    scope: Scope,
    status: int,
    message: str,
    code: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer `status` with the error; `param` names what was wrong (a header's name)."""
    if speaks_anthropic(scope["path"]):
        shaped = anthropic_error_body(message, status)
    elif speaks_native(scope["path"]):
        shaped = native_error_body(message, status)
    else:
        shaped = error_body(message, status, param=param, code=code)
    body = json.dumps(shaped).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        raw.append((b"www-authenticate", b"Bearer"))
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
