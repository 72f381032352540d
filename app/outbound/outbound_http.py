"""`Outbound`: this server's requests to other hosts, built once at start-up: the address policy
and the resolver every client of it connects through (app/outbound/guarded_transport.py).

`fetch` takes a whole body (a remote image): one deadline for all of it (the lookup, each
connection and redirect, every byte; a server that sends a byte every few seconds is cut off at
the deadline, not kept for as long as it trickles) and a size limit, past which it stops reading.
Its errors (`FetchError`) say what went wrong in the client's terms and no more: not the remote
status, nor the addresses a name resolved to, nor the resolver's or the socket's own words (the
log has those).

httpx is imported on first use: with rich installed (a dev dependency) it loads its command line
too, which every server start would otherwise pay for.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from app.outbound.address_policy import OutboundPolicy, OutboundRefused
from app.outbound.resolver import Resolver

if TYPE_CHECKING:
    import httpcore
    import httpx


log = logging.getLogger(__name__)


class FetchError(Exception):
    """A fetch that failed; `message` is for the client. `refused`: the address policy's."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.refused = refused


class Outbound:
    def __init__(
        self,
        policy: OutboundPolicy,
        resolve: Resolver,
        network: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolve = resolve
        self.network = network  # what connects to a checked address (None: sockets; tests: fakes)

    def client(self, timeout: float) -> httpx.AsyncClient:
        """A client whose every connection is checked (`timeout`: per connect, read, write)."""
        from app.outbound.guarded_transport import GuardedBackend, guarded_client

        backend = GuardedBackend(self.policy, self.resolve, self.network)
        return guarded_client(backend, timeout)

    async def fetch(self, url: str, max_bytes: int, deadline_s: float) -> bytes:
        """The body of a GET of `url` answered 200, within `deadline_s` in all and `max_bytes`."""
        import httpx

        try:
            async with asyncio.timeout(deadline_s), self.client(deadline_s) as client:
                return await _body(client, url, max_bytes)
        except OutboundRefused as e:
            raise FetchError(str(e), refused=True) from None
        except TimeoutError:
            raise FetchError(f"the URL did not answer in full within {deadline_s:g} s") from None
        except httpx.HTTPError as e:
            log.info("fetching %s failed: %s: %s", _shown(url), type(e).__name__, e)
            raise FetchError("the URL could not be fetched") from None


async def _body(client: httpx.AsyncClient, url: str, max_bytes: int) -> bytes:
    too_large = FetchError(f"the URL's content is larger than the limit of {max_bytes} bytes")
    # Sent as is: a compressed body would be decompressed past the size limit's view.
    async with client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as r:
        if r.status_code != 200:
            log.info("fetching %s: HTTP %d", _shown(url), r.status_code)
            raise FetchError("the URL could not be fetched")
        declared = r.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise too_large
        data = bytearray()
        async for part in r.aiter_raw():
            data += part
            if len(data) > max_bytes:
                raise too_large
        return bytes(data)


def _shown(url: str) -> str:
    """The URL for the log, without its query (which may carry a token)."""
    return url.split("?", 1)[0][:200]
