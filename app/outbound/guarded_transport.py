"""`GuardedBackend`: every connection an outbound client opens goes through the address policy.

httpx connects through httpcore's network backend, once per new connection: the first request
and every redirect to another host (at most MAX_REDIRECTS, each checked so). This backend looks
the host up itself (app/outbound/resolver.py), refuses it unless every address is one the policy
allows, and connects to the checked address, so a name that resolves to a public address when
checked and to a private one a moment later (DNS rebinding) still reaches the checked one. TLS
still verifies the certificate against the host name: httpcore gives the name, not the address,
to the handshake.

`guarded_client` is an httpx client on it. It ignores HTTP_PROXY and the like: a proxy would
resolve the names itself, past the check.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from app.outbound.address_policy import OutboundPolicy, OutboundRefused
from app.outbound.resolver import Resolver

MAX_REDIRECTS = 5


class GuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(
        self,
        policy: OutboundPolicy,
        resolve: Resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolve = resolve
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            found = await self.resolve(host, port)
        except OSError:
            raise httpcore.ConnectError(f"{host} could not be resolved") from None
        addresses = self.policy.check(host, found)
        if not addresses:
            raise httpcore.ConnectError(f"{host} could not be resolved")
        failed: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                failed = e
        assert failed is not None
        raise failed

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise OutboundRefused("a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool on a `GuardedBackend`."""

    def __init__(self, backend: GuardedBackend) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=16,
            network_backend=backend,
        )


def guarded_client(backend: GuardedBackend, timeout: float) -> httpx.AsyncClient:
    """A client whose every connection is checked; it follows at most MAX_REDIRECTS redirects,
    each checked as it connects; `timeout` is per connect, read and write."""
    return httpx.AsyncClient(
        transport=GuardedTransport(backend),
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        timeout=timeout,
        trust_env=False,
    )
