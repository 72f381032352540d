"""A resolver and a network the tests control: names map to the addresses a test gives, and
"connecting" records the address and answers from canned bytes, so no test ever opens a socket
to what a name resolved to (169.254.169.254, 10.0.0.1 or a public address)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore

from app.outbound.address_policy import OutboundPolicy
from app.outbound.outbound_http import Outbound

NAMES = {
    "public.test": ["93.184.216.34"],
    "other.test": ["93.184.216.35"],
    "metadata.test": ["169.254.169.254"],
    "intranet.test": ["10.0.0.1"],
    "mixed.test": ["93.184.216.34", "10.0.0.1"],
}


class FakeResolver:
    def __init__(self, names: dict[str, list[str]] | None = None) -> None:
        self.names = NAMES if names is None else names
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host in self.names:
            return self.names[host]
        if host[:1].isdigit() or ":" in host:
            return [host]
        raise OSError(f"no such name: {host}")


class Canned(httpcore.AsyncMockBackend):
    """Each connection answers with the next canned response; connections are recorded."""

    def __init__(self, answers: list[list[bytes]], slow: float = 0.0) -> None:
        super().__init__([])
        self.answers = list(answers)
        self.connected: list[str] = []
        self.slow = slow

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connected.append(host)
        return SlowStream(self.answers.pop(0), self.slow)


class SlowStream(httpcore.AsyncMockStream):
    """Its bytes, each read after `delay` seconds (a server that trickles)."""

    def __init__(self, buffer: list[bytes], delay: float) -> None:
        super().__init__(buffer)
        self.delay = delay

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self.delay:
            await httpcore.AnyIOBackend().sleep(self.delay)
        return await super().read(max_bytes, timeout)


def answer(status: str, body: bytes = b"", **headers: str) -> list[bytes]:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}"]
    head += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return [("\r\n".join(head) + "\r\n\r\n").encode(), body]


def outbound(net: Canned, resolver: FakeResolver | None = None, allow: str = "") -> Outbound:
    """An Outbound whose every connection goes to `net`, through the real guard."""
    return Outbound(OutboundPolicy.from_list(allow), resolver or FakeResolver(), net)
