"""llama-server's CORS proxy (`/cors-proxy?url=...`, its web UI's way to reach MCP servers that
send no CORS headers): the server makes the request itself and streams the answer back.

Only headers the caller names for the target travel: `X-Llama-Server-Proxy-Header-NAME: value`
is sent as `NAME: value`. The caller's own Authorization, X-Api-Key, cookies and the rest are
its credentials for this server, never the target's.

The target must be a public address, checked after its name is looked up and on every redirect
(app/outbound/), unless `--fetch-allow-hosts` names it: a key of this server must not make it a
way into its loopback services, the cloud's metadata service or its private network. Refused,
unreachable, the answer says so without the remote details.

The target's answer comes back with its status, body and headers, less those of the hop (Server,
Transfer-Encoding, Content-Length, Keep-Alive), its CORS headers (this server sends its own) and
its cookies; and it is served so that it can never run as a page of this server's origin (the
web UI's, whose session it could read): JSON, event streams and plain text keep their type (what
the UI's MCP client reads), any other type becomes application/octet-stream, and every answer is
sent as an attachment, under `Content-Security-Policy: sandbox` and `nosniff`. The whole answer
takes at most --timeout (llama-server's 600 s per read otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import StreamingResponse

from app.engine.request import RequestError
from app.outbound.address_policy import OutboundRefused
from app.outbound.outbound_http import Outbound

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

PREFIX = "x-llama-server-proxy-header-"
TIMEOUT_S = 600.0  # llama-server's read and write timeouts
NOT_SENT = {"accept-encoding", "transfer-encoding", "content-length"}  # the hop's own
NOT_RETURNED = {
    "server",
    "transfer-encoding",
    "content-length",
    "keep-alive",
    "content-encoding",
    "set-cookie",  # the target's cookies would be this origin's
    "set-cookie2",
    "content-type",  # set below
    "content-security-policy",
    "content-security-policy-report-only",
    "content-disposition",
    "x-content-type-options",
    "refresh",  # a navigation of this origin's page
}
# What the web UI's MCP client reads (JSON-RPC, server-sent events) and plain text.
SAFE_TYPES = {"application/json", "text/event-stream", "text/plain", "application/x-ndjson"}
SERVED_AS = {
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "Content-Disposition": "attachment",
}


def target_url(url: str | None) -> str:
    """The target, checked as llama-server checks it (a RequestError says what is wrong)."""
    if not url:
        raise RequestError("give the target as ?url=http://host/path", param="url")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (reading it checks it)
    except ValueError as e:
        raise RequestError(f"the target URL is not valid: {e}", param="url") from None
    if parts.scheme not in ("http", "https"):
        raise RequestError(
            f"unsupported URL scheme in target URL: {parts.scheme or '(none)'}", param="url"
        )
    if not parts.hostname:
        raise RequestError("invalid target URL: missing host", param="url")
    if parts.password is not None:
        raise RequestError("authentication in target URL is not supported", param="url")
    return url if parts.path else url.replace(parts.netloc, parts.netloc + "/", 1)


def forwarded_headers(request: Request) -> dict[str, str]:
    """The headers the caller named for the target, under their own names."""
    headers: dict[str, str] = {"accept-encoding": "identity"}  # as llama-server: uncompressed
    for key, value in request.headers.items():
        name = key[len(PREFIX) :] if key.startswith(PREFIX) else ""
        if name and name not in NOT_SENT:
            headers[name] = value
    return headers


def served_type(content_type: str | None) -> str:
    """The target's content type if it is one that cannot run as a page, else octet-stream."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in SAFE_TYPES or (media.startswith("application/") and media.endswith("+json")):
        return content_type or media
    return "application/octet-stream"


def returned_headers(answer: httpx.Response) -> dict[str, str]:
    headers = {
        k: v
        for k, v in answer.headers.items()
        if k not in NOT_RETURNED and not k.startswith("access-control-")
    }
    return {**headers, **SERVED_AS, "Content-Type": served_type(answer.headers.get("content-type"))}


async def forward(
    request: Request, method: str, outbound: Outbound, deadline_s: float
) -> StreamingResponse:
    """`deadline_s`: the most the whole answer may take (0: llama-server's per-read timeout)."""
    import httpx

    url = target_url(request.query_params.get("url"))
    body = await request.body() if method == "POST" else None
    deadline = time.monotonic() + deadline_s if deadline_s > 0 else None
    client = outbound.client(min(TIMEOUT_S, deadline_s) if deadline_s > 0 else TIMEOUT_S)
    try:
        sent = client.build_request(method, url, headers=forwarded_headers(request), content=body)
        answer = await _within(client.send(sent, stream=True), deadline)
    except OutboundRefused as e:
        await client.aclose()
        raise RequestError(str(e), param="url", code="url_not_allowed") from None
    except (httpx.HTTPError, TimeoutError) as e:
        await client.aclose()
        log.info("cors-proxy: %s failed: %s: %s", url.split("?", 1)[0], type(e).__name__, e)
        raise RequestError(
            "the target could not be reached", param="url", code="bad_gateway", status=502
        ) from None
    return StreamingResponse(
        _body(answer, client, deadline),
        status_code=answer.status_code,
        headers=returned_headers(answer),
    )


async def _within(step, deadline: float | None):  # noqa: ANN001, ANN202
    if deadline is None:
        return await step
    return await asyncio.wait_for(step, max(0.0, deadline - time.monotonic()))


async def _body(
    answer: httpx.Response, client: httpx.AsyncClient, deadline: float | None
) -> AsyncIterator[bytes]:
    """The target's body as it comes, until it ends or the deadline passes (then cut short)."""
    import httpx

    chunks = answer.aiter_bytes()
    try:
        while True:
            try:
                chunk = await _within(anext(chunks), deadline)
            except (StopAsyncIteration, TimeoutError):
                return
            except httpx.HTTPError as e:
                log.info("cors-proxy: the target's answer broke off: %s", type(e).__name__)
                return
            yield chunk
    finally:
        await answer.aclose()
        await client.aclose()
