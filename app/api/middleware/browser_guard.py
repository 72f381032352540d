"""`BrowserGuard`: what a web page open in the user's browser could make the server do, refused
before anything else sees the request.

- DNS rebinding: a page of evil.example whose name is made to resolve to 127.0.0.1 calls the
  server as its own origin, so CORS never applies. Every such request names the attacker's host
  in `Host`, so a server bound only to loopback answers only requests that name a local host
  (localhost, *.localhost, a loopback address) or one listed in --allowed-hosts. A server bound
  to another address answers any host unless --allowed-hosts lists them.
- Cross-site requests: a form or text/plain POST needs no CORS preflight, so the browser sends
  it and only hides the answer; the generation, slot erase or cache reset it asked for would
  run. A request that carries no API key and comes from a page (an `Origin`) that is neither the
  server's own (same host as `Host`) nor allowed by the CORS policy is refused, whatever its
  method or content type. A request with a key passed a preflight to send it (or is no
  browser's), and the key check decides.

Both answer 403 in the shape of the API the path speaks, with the header's name in `param`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.middleware.cors import CorsPolicy
from app.api.middleware.refusal import refuse

DEFAULT_PORTS = {"http": 80, "https": 443}
# A name or an IPv4 address, or an IPv6 address in brackets; then an optional port.
HOST = re.compile(r"(?P<name>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(?::(?P<port>[0-9]{1,5}))?")


def is_local_name(host: str) -> bool:
    """localhost, a name under .localhost (browsers resolve those to loopback themselves) or
    a loopback address."""
    name = host.lower().rstrip(".").strip("[]")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header's name (lower case, no trailing dot) and port; None if malformed."""
    m = HOST.fullmatch(value)
    port = int(m.group("port")) if m and m.group("port") else None
    if m is None or (port is not None and not 0 < port < 65536):
        return None
    return m.group("name").strip("[]").lower().rstrip("."), port


@dataclass(slots=True, frozen=True)
class HostPolicy:
    """The host names requests may name in `Host`; None: any."""

    names: frozenset[str] | None = None

    def allows(self, host: str) -> bool:
        if self.names is None:
            return True
        parts = split_host(host)
        return parts is not None and (is_local_name(parts[0]) or parts[0] in self.names)


def host_policy(allowed_hosts: str | None, bound: list[str]) -> HostPolicy:
    """--allowed-hosts as given (* any; local names are always allowed), or, unset, local names
    only when every address the server listens on is loopback."""
    if allowed_hosts is not None:
        names = [h.strip().lower().rstrip(".") for h in allowed_hosts.split(",") if h.strip()]
        return HostPolicy(None if "*" in names else frozenset(names))
    return HostPolicy(frozenset() if bound and all(map(is_local_name, bound)) else None)


def same_host(origin: str, host: str) -> bool:
    """The page's origin is the server's own: the same host name, and the same port where the
    Host header names one (a proxy may pass the name alone, as nginx's $host does)."""
    try:
        url = urlsplit(origin)
        port = url.port or DEFAULT_PORTS.get(url.scheme)
    except ValueError:
        return False
    parts = split_host(host)
    if parts is None or url.hostname is None or url.hostname.rstrip(".") != parts[0]:
        return False
    return parts[1] is None or parts[1] == port


class BrowserGuard:
    def __init__(self, app: ASGIApp, hosts: HostPolicy, cors: CorsPolicy) -> None:
        self.app = app
        self.hosts = hosts
        self.cors = cors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "")
        if not self.hosts.allows(host):
            message = (
                f"this server does not answer requests for the host {host!r}: it listens on "
                "loopback, so call it as localhost or 127.0.0.1, or list the name in "
                "--allowed-hosts"
            )
            await refuse(send, scope, 403, message, "host_not_allowed", param="Host")
            return
        origin = headers.get("origin", "")
        if origin and scope["method"] != "OPTIONS" and not self._origin_ok(origin, host, headers):
            message = (
                f"a web page of {origin} may not call this server without an API key: that "
                "origin is not allowed (--cors-origins)"
            )
            await refuse(send, scope, 403, message, "origin_not_allowed", param="Origin")
            return
        await self.app(scope, receive, send)

    def _origin_ok(self, origin: str, host: str, headers: dict[str, str]) -> bool:
        if headers.get("authorization") or headers.get("x-api-key"):
            return True  # not a simple request: a browser sent it only after a preflight
        if same_host(origin, host):
            return True
        return self.cors.allowed_origin(origin) in (origin, "*")


def _headers(scope: Scope) -> dict[str, str]:
    """The headers that matter here, by lower-case name (the first of each)."""
    out: dict[str, str] = {}
    for key, value in scope["headers"]:
        name = key.decode("latin-1").lower()
        if name in ("host", "origin", "authorization", "x-api-key") and name not in out:
            out[name] = value.decode("latin-1").strip()
    return out
