"""`OutboundPolicy`: which addresses a request of this server to another host may reach.

Only public (globally routable) addresses: a URL a client gives must not make the server reach
what only the server can, such as its own loopback services, the cloud's metadata service at
169.254.169.254 (link-local), or the private network it sits in. The check is on the addresses
the host name resolves to, so a public name that resolves to 10.0.0.1 is refused as 10.0.0.1 is;
an address written another way (`::ffff:127.0.0.1`, an IPv4 address inside a NAT64 or 6to4 IPv6
one) is checked as the IPv4 address it reaches. Hosts the operator names (`--fetch-allow-hosts`,
by the name or address in the URL) may resolve to any address: an MCP server on the LAN, say.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix: IPv4 in its tail


class OutboundRefused(Exception):
    """A host this server will not connect to; the message names the host, never what it
    resolved to (the client need not learn the server's network)."""

    def __init__(self, host: str) -> None:
        super().__init__(
            f"{host} is a loopback, link-local or private address, or resolves to one; "
            "this server only connects to public addresses"
        )
        self.host = host


def host_key(host: str) -> str:
    """A host as the allow list compares it: lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().strip("[]").rstrip(".").lower()


def reaches(ip: IPAddress) -> list[IPAddress]:
    """The address and the IPv4 address it reaches, if it wraps one."""
    found: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            found.append(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            found.append(ip.sixtofour)
        if ip in NAT64:
            found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def is_public(ip: IPAddress) -> bool:
    """Globally routable and unicast, and so is any IPv4 address it wraps."""
    return all(a.is_global and not a.is_multicast for a in reaches(ip))


@dataclass(slots=True, frozen=True)
class OutboundPolicy:
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)  # host_key()s

    @classmethod
    def from_list(cls, hosts: str | Iterable[str] | None) -> OutboundPolicy:
        """From `--fetch-allow-hosts` (comma-separated) or a list."""
        if hosts is None:
            return cls()
        names = hosts.split(",") if isinstance(hosts, str) else hosts
        return cls(frozenset(host_key(h) for h in names if h.strip()))

    def allows_any_address(self, host: str) -> bool:
        return host_key(host) in self.allowed_hosts

    def check(self, host: str, addresses: Iterable[str]) -> list[str]:
        """The addresses to connect to, or OutboundRefused if any of them is not public (a name
        that resolves to a public and a private address is refused: it is one or the other
        at the resolver's whim)."""
        found = list(addresses)
        if not found or self.allows_any_address(host):
            return found
        for a in found:
            try:
                ip = ipaddress.ip_address(a)
            except ValueError:
                raise OutboundRefused(host) from None
            if not is_public(ip):
                raise OutboundRefused(host)
        return found
