"""`ArrivalTickets`: a generation request takes the engine's arrival ticket as it arrives.

The engine, idle and about to prefill one request, waits briefly for the others that have arrived
but are still being read, validated and tokenized (app/engine/core/arrivals.py), so a burst of users
is prefilled in one batch. The ticket is taken here, before a byte of the body is read, and
settled by the engine as it queues the request (the responder hands it over); whatever ends a
request earlier (a refused key, a bad body, an unknown session) settles it when the response
ends. Generation requests are the routes `route_of` names (chat, completions, session turns,
document questions).

Every POST also touches the engine (`Engine.touch`): the idle time of `--sleep-idle-seconds`
starts again, and a sleeping model starts loading while the body is still being read, as
llama-server wakes for any task. GETs (`/health`, `/props`, `/models`, `/metrics`, `/slots`)
leave it asleep.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.metrics import route_of


class ArrivalTickets:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services = getattr(scope["app"].state, "services", None) if "app" in scope else None
        if services is not None and scope["type"] == "http" and scope["method"] == "POST":
            services.engine.touch()
        generates = scope["type"] == "http" and route_of(scope["path"], scope["method"])
        if services is None or not generates:
            await self.app(scope, receive, send)
            return
        ticket = services.engine.expect_arrival()
        scope.setdefault("state", {})["arrival"] = ticket
        try:
            await self.app(scope, receive, send)
        finally:
            ticket.settle()
