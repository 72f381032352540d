"""`ReplicaHeader`: every response names the replica that answered it (`X-Replica`), so a
client or an operator behind a load balancer can tell which server a request reached."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-replica"


class ReplicaHeader:
    def __init__(self, app: ASGIApp, name: str) -> None:
        self.app = app
        self.value = name.encode("latin-1", errors="replace")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (HEADER, self.value)]
            await send(message)

        await self.app(scope, receive, named)
