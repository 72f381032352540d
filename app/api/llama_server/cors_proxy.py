"""llama-server's CORS proxy (`/cors-proxy?url=...`, its web UI's way to reach MCP servers that
send no CORS headers): the server makes the request itself and streams the answer back.

Only headers the caller names for the target travel: `X-Llama-Server-Proxy-Header-NAME: value`
is sent as `NAME: value`. The caller's own Authorization, X-Api-Key, cookies and the rest are
its credentials for this server, never the target's. The target's answer comes back with its
status, body and headers, less those of the hop (Server, Transfer-Encoding, Content-Length,
Keep-Alive) and its CORS headers (this server sends its own).

httpx is imported on first use: with rich installed (a dev dependency) it loads its command line
too, which every server start would otherwise pay for a route few servers enable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import StreamingResponse

from app.engine.request import RequestError

if TYPE_CHECKING:
    import httpx

PREFIX = "x-llama-server-proxy-header-"
TIMEOUT_S = 600.0  # llama-server's read and write timeouts
NOT_SENT = {"accept-encoding", "transfer-encoding", "content-length"}  # the hop's own
NOT_RETURNED = {"server", "transfer-encoding", "content-length", "keep-alive", "content-encoding"}


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
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        name = key[len(PREFIX) :] if key.startswith(PREFIX) else ""
        if name and name not in NOT_SENT:
            headers[name] = value
    return headers


async def forward(request: Request, method: str) -> StreamingResponse:
    import httpx

    url = target_url(request.query_params.get("url"))
    body = await request.body() if method == "POST" else None
    client = httpx.AsyncClient(follow_redirects=True, timeout=TIMEOUT_S)
    try:
        sent = client.build_request(method, url, headers=forwarded_headers(request), content=body)
        answer = await client.send(sent, stream=True)
    except httpx.HTTPError as e:
        await client.aclose()
        raise RequestError(f"the target could not be reached: {e}", status=502) from None
    headers = {
        k: v
        for k, v in answer.headers.items()
        if k not in NOT_RETURNED and not k.startswith("access-control-")
    }
    return StreamingResponse(_body(answer, client), status_code=answer.status_code, headers=headers)


async def _body(answer: httpx.Response, client: httpx.AsyncClient) -> AsyncIterator[bytes]:
    try:
        async for chunk in answer.aiter_bytes():
            yield chunk
    finally:
        await answer.aclose()
        await client.aclose()
