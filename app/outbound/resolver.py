"""`Resolver`: a host's addresses, looked up for an outbound connection to check them before it
connects (app/outbound/guarded_transport.py). The system's resolver blocks (getaddrinfo, seconds
for a slow DNS server), so it runs in the fetch pool's threads, never in the ones key lookups and
database calls use; a test gives a resolver of its own that maps names as it likes."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable

from app.thread_pools import WorkerPool

# (host, port) -> its addresses, in the resolver's order.
Resolver = Callable[[str, int], Awaitable[list[str]]]


def pool_resolver(pool: WorkerPool) -> Resolver:
    """The system's resolver (getaddrinfo), run in `pool`'s threads."""

    def lookup(host: str, port: int) -> list[str]:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in found))

    async def resolve(host: str, port: int) -> list[str]:
        try:
            ipaddress.ip_address(host)
            return [host]  # an address: nothing to look up
        except ValueError:
            return await pool.run(lookup, host, port)

    return resolve
