"""A request forwarded to a model's server, and its response streamed back as it comes.

The request goes as it came (method, path, query, headers but the hop-by-hop ones, body): the
model's server checks the key and answers in its own API's shape. The response's status, headers
and body bytes come back unchanged, streamed (a generation's events as they are sent). When the
client leaves, the connection to the model's server is closed, which cancels its generation.
`on_end` runs once the response has ended, however it ended (RouterError 502 when the model's
server does not answer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from app.router.model_router import RouterError

# Per connection, not forwarded (RFC 9110 section 7.6.1), and what httpx sets itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0)  # a reply takes long


def _headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in raw if k.decode("latin-1").lower() not in HOP_BY_HOP]


async def forward(
    client: httpx.AsyncClient,
    request: Request,
    body: bytes,
    base_url: str,
    on_end: Callable[[], Awaitable[None]],
) -> Response:
    url = base_url + request.url.path + (f"?{request.url.query}" if request.url.query else "")
    upstream_request = client.build_request(
        request.method, url, headers=_headers(request.headers.raw), content=body, timeout=TIMEOUT
    )
    try:
        upstream = await client.send(upstream_request, stream=True)
    except httpx.HTTPError as e:
        await on_end()
        raise RouterError("the model's server did not answer; try again", 502, "unavailable") from e

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        finally:
            await upstream.aclose()
            await on_end()

    response = StreamingResponse(relay(), status_code=upstream.status_code)
    response.raw_headers = _headers(upstream.headers.raw)
    return response
