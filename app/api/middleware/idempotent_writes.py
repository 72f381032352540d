"""`IdempotentWrites`: a POST that stores, sent with `Idempotency-Key`, stores once.

A client (or nginx, for its own retries: deploy/nginx.conf) sends `Idempotency-Key: <string>`
on a write: a session created, a session turn, an upload, a response. The first request with
the key runs; its response, once it succeeded, is kept (app/db/replicas/idempotency_keys.py) and a
retry with the same key and body gets that response again (`Idempotent-Replayed: true`) without
anything stored again. The key is the tenant's, per method and path.

The replica running the request holds a lease on its key and renews it every third of it. A
retry that arrives while the key is held waits for the request to end (then replays it) or for
its lease to run out (its replica died: the retry takes it over); still held after a lease and
a third, it is running on a live replica: 409. A taken-over request sees what the first try
noted before it stored anything (`ticket_of(request).stored`): a session turn whose user
message is stored but never answered answers that message instead of storing it again. The
same key with another body is refused (422, param "Idempotency-Key").

Only a whole success is kept: a 2xx whose last byte was sent. A stream that began with its 200
and then failed, or whose client went away before its end, is not (`mark_unfinished` says so
from inside; a response cut short never sends its last part): its key is let go, and the retry
takes the request over instead of being replayed the cut-short stream.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response
from app.api.middleware.body_limit import BodyTooLarge
from app.config import Settings
from app.db.replicas.idempotency_keys import Claim, IdempotencyKeys, KeyedRequest

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
MAX_KEY = 255
# The POSTs that store something.
KEYED = re.compile(
    r"^(/v1/(sessions|sessions/[^/]+/(messages|regenerate|fork)|media|collections"
    r"|collections/[^/]+/documents|responses)|/responses)/?$"  # llama-server's path too
)
PRUNE_EVERY_S = 600.0
DATABASE_DOWN = (OperationalError, InterfaceError, PoolTimeout)


@dataclass(slots=True)
class Ticket:
    """A keyed request's hold on its key, on `request.state.idempotency`."""

    keys: IdempotencyKeys
    record_id: int
    holder: str
    stored: dict[str, Any] = field(default_factory=dict)  # what an earlier try noted
    resumed: bool = False  # an earlier try on a replica that died was taken over

    async def note(self, **stored: Any) -> None:
        """Say what the request is about to store (before storing it)."""
        self.stored.update(stored)
        await asyncio.to_thread(self.keys.note, self.record_id, self.holder, stored)


def ticket_of(request: Request) -> Ticket | None:
    return getattr(request.state, "idempotency", None)


UNFINISHED = "reply_unfinished"  # on the request's state: its response must not be kept


def mark_unfinished(request: Request) -> None:
    """The response has begun (its status sent) but did not end as it should (the generation
    failed or was cut short): a retry must run it again, not be replayed it."""
    setattr(request.state, UNFINISHED, True)


class IdempotentWrites:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.holder = settings.replica()
        self.lease_s = settings.idempotency_lease
        self.retention_s = settings.idempotency_retention
        self._pruned = 0.0  # when this replica last pruned (monotonic)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _header(scope)
        services = getattr(scope["app"].state, "services", None) if "app" in scope else None
        if key is None or services is None or not _keyed(scope):
            await self.app(scope, receive, send)
            return
        if not 0 < len(key) <= MAX_KEY or not key.isprintable():
            message = f"{HEADER} must be 1 to {MAX_KEY} printable characters"
            await _refuse(scope, receive, send, 400, message)
            return
        try:
            body = await _read_body(receive)
        except BodyTooLarge as e:
            await error_response(e.detail, 413, code="request_too_large")(scope, receive, send)
            return
        keys = IdempotencyKeys(services.store)
        tenant = scope.get("state", {}).get("tenant_id", "")
        route = f"{scope['method']} {scope['path'].rstrip('/')}"
        asked = KeyedRequest(tenant, route, key, _body_hash(scope, body))
        try:
            claim = await self._claim(keys, asked)
        except DATABASE_DOWN as e:  # as every route answers it: another replica may reach it
            log.warning("database unavailable: %s", str(e).splitlines()[0] if str(e) else e)
            message, headers = "the database is unavailable; try again", {"Retry-After": "1"}
            refusal = error_response(message, 503, code="unavailable", headers=headers)
            await refusal(scope, receive, send)
            return
        if claim.outcome == "mismatch":
            message = f"{HEADER} {key!r} was already used with another request body; use a new key"
            await _refuse(scope, receive, send, 422, message)
            return
        if claim.outcome == "busy":
            message = f"a request with {HEADER} {key!r} is still running; retry after it ends"
            await _refuse(scope, receive, send, 409, message, "request_in_progress")
            return
        if claim.outcome == "replay":
            await _replay(claim, send)
            return
        resumed = claim.outcome == "resumed"
        ticket = Ticket(keys, claim.record_id, self.holder, claim.stored, resumed)
        scope.setdefault("state", {})["idempotency"] = ticket
        await self._run(scope, _replayed_body(body, receive), send, ticket)

    async def _claim(self, keys: IdempotencyKeys, asked: KeyedRequest) -> Claim:
        """Claim the key; while another replica holds it, wait for its end or its lease to run
        out; a holder still renewing it after a lease and a third is alive."""
        await self._maybe_prune(keys)
        deadline = time.monotonic() + self.lease_s * 4 / 3
        while True:
            claim = await asyncio.to_thread(
                keys.claim, asked, self.holder, self.lease_s, self.retention_s
            )
            if claim.outcome != "busy" or time.monotonic() > deadline:
                return claim
            await asyncio.sleep(min(0.2, self.lease_s / 10))

    async def _maybe_prune(self, keys: IdempotencyKeys) -> None:
        now = time.monotonic()
        if now - self._pruned < PRUNE_EVERY_S:
            return
        self._pruned = now
        try:
            await asyncio.to_thread(keys.prune, self.retention_s)
        except Exception:  # pruning waits for the next time; the request goes on
            log.exception("could not prune the idempotency keys")

    async def _run(self, scope: Scope, receive: Receive, send: Send, ticket: Ticket) -> None:
        """Run the request, renewing the lease; keep a success's response, else let go."""
        sent: dict[str, Any] = {"status": 500, "type": None, "body": [], "ended": False}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
                headers = dict(message.get("headers", []))
                sent["type"] = headers.get(b"content-type", b"").decode() or None
            elif message["type"] == "http.response.body":
                sent["body"].append(message.get("body", b""))
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                sent["ended"] = True  # the last part went out

        renewing = asyncio.get_running_loop().create_task(self._renew(ticket))
        ok = False
        try:
            await self.app(scope, receive, capture)
            whole = sent["ended"] and not scope.get("state", {}).get(UNFINISHED)
            ok = 200 <= sent["status"] < 300 and whole
        finally:
            renewing.cancel()
            await self._settle(ticket, sent if ok else None)

    async def _settle(self, ticket: Ticket, sent: dict[str, Any] | None) -> None:
        """Keep the response of a success (`sent`), else let the key go to the next try. If the
        database cannot be told, the lease runs out by itself (a retry then takes over)."""
        keys, rid, holder = ticket.keys, ticket.record_id, ticket.holder
        try:
            if sent is not None:
                body = b"".join(sent["body"])
                status, ctype = sent["status"], sent["type"]
                await asyncio.to_thread(keys.finish, rid, holder, status, ctype, body)
            else:
                await asyncio.to_thread(keys.release, rid, holder)
        except DATABASE_DOWN:
            log.exception("could not record the end of a request with an idempotency key")

    async def _renew(self, ticket: Ticket) -> None:
        # A third of the lease: two renewals may fail (a database hiccup) before it runs out.
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await asyncio.to_thread(
                    ticket.keys.renew, ticket.record_id, ticket.holder, self.lease_s
                )
            except Exception:
                log.exception("could not renew the hold on an idempotency key")


def _header(scope: Scope) -> str | None:
    if scope["type"] != "http":
        return None
    for name, value in scope["headers"]:
        if name == b"idempotency-key":
            return value.decode("latin-1").strip()
    return None


def _keyed(scope: Scope) -> bool:
    return scope["method"] == "POST" and KEYED.match(scope["path"]) is not None


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: what came is all there is
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _replayed_body(body: bytes, receive: Receive) -> Receive:
    """The body read here, then the connection's own messages (a disconnect)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _body_hash(scope: Scope, body: bytes) -> str:
    """sha256 of the body; a multipart body without its boundary (a client's retry may draw a
    new one for the same upload)."""
    content_type = dict(scope["headers"]).get(b"content-type", b"")
    found = re.search(rb"boundary=\"?([^\";]+)", content_type)
    if found is not None:
        body = body.replace(found.group(1), b"")
    return hashlib.sha256(body).hexdigest()


async def _refuse(
    scope: Scope, receive: Receive, send: Send, status: int, message: str, code: str | None = None
) -> None:
    await error_response(message, status, param=HEADER, code=code)(scope, receive, send)


async def _replay(claim: Claim, send: Send) -> None:
    body = claim.response or b""
    headers = [
        (b"content-type", (claim.content_type or "application/json").encode()),
        (b"content-length", str(len(body)).encode()),
        (b"idempotent-replayed", b"true"),
    ]
    status = claim.status_code or 200
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
