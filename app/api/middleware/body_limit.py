"""`BodyLimit`: request bodies over `--max-body-bytes` get a 413 before more of them is read.

A declared Content-Length over the limit is refused before a byte of the body is read; a
chunked body is counted as it arrives and refused at the chunk that passes the limit. Without
it a 30 MB chat body was read, parsed and tokenized whole before its 400, stalling the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_body
from app.api.kvchat.media_upload import MULTIPART_OVERHEAD
from app.config import Settings

LimitFor = Callable[[Scope], int]


def largest_body(settings: Settings) -> int:
    """The largest body a route accepts: --max-body-bytes, or a media upload (read as it
    streams, see app/api/kvchat/media_upload.py) as large as --image-max-bytes allows. A load
    balancer in front sets its own limit to this (app/cluster/nginx.py)."""
    return max(settings.max_body_bytes, settings.image_max_bytes + MULTIPART_OVERHEAD)


class BodyTooLarge(HTTPException):
    """Raised from `receive`: FastAPI passes HTTP exceptions through to the error handler."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, limit_for: LimitFor) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(send, limit)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counted, send)


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps(error_body(BodyTooLarge(limit).detail, 413, code="request_too_large"))
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            # The rest of the body is never read: the connection cannot be kept.
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})
