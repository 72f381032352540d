"""`Auth`: API keys, the caller's tenant, and a per-key bound on requests at once.

With keys configured (`--api-key`, or keys made with `python -m app keys create`) every route
but /health and the web UI's files needs `Authorization: Bearer KEY`; /metrics, /slots and
/cache (and slot actions) need an admin key. Without any key the server is open, as before.

Keys fail closed: once the database holds a key, the server stays keyed while any key is there,
revoked ones included (app/db/key_store.py), so revoking the last key refuses everyone until a
key is created or an admin opens the server on purpose (`python -m app keys open`).

Every request that passes gets `request.state.tenant_id` (the key's tenant; "" for the static
key and the open server) and `request.state.cache_salt`, derived here from the tenant: every
prefix-cache key includes it, and a client's `cache_salt` is appended to it, so a client can
only subdivide its own tenant's cache, never reach another's (vLLM CVE-2025-46570).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections import Counter
from dataclasses import dataclass

from fastapi import Request
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.middleware.refusal import refuse
from app.api.web_ui.frontend import API_PREFIXES
from app.db.key_store import KeysState, KeyStore

log = logging.getLogger(__name__)

ADMIN_PREFIXES = ("/metrics", "/slots", "/cache")
# How long "are there any keys?" is remembered: a key created while the server runs closes
# the open server within this time (and the one request that starts the recheck), without a
# database query on any request's path: the recheck runs beside the request, not before it.
# Only an admin's `keys open` can turn the answer from yes to no (revoking never does).
KEYS_RECHECK_S = 2.0
NO_LIVE_KEY = (
    "every API key is revoked: the server refuses every request but /health until a key is "
    "created (python -m app keys create) or an admin opens it (python -m app keys open)"
)


@dataclass(slots=True)
class Caller:
    tenant_id: str
    admin: bool
    key_id: str | None  # None: the open server (no keys configured)


def tenant_salt(tenant_id: str) -> str:
    """The server's part of every cache key of a tenant (never sent by a client)."""
    digest = hashlib.blake2b(f"tenant:{tenant_id}".encode(), digest_size=16).hexdigest()
    return f"t{digest}/"


def cache_salt(request: Request, client_salt: str = "") -> str:
    """The salt of a request's cache keys: its tenant's, then the client's subdivision."""
    base = getattr(request.state, "cache_salt", None)
    return (base if base is not None else tenant_salt("")) + client_salt


def tenant_of(request: Request) -> str:
    return getattr(request.state, "tenant_id", "")


class Auth:
    def __init__(self, app: ASGIApp, static_key: str | None, max_per_key: int) -> None:
        self.app = app
        self.static_key = static_key
        self.max_per_key = max_per_key
        self.running: Counter[str] = Counter()  # key id -> requests in flight
        self._keys_seen: tuple[float, KeysState] | None = None  # (when checked, what was seen)
        self._recheck: asyncio.Task | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services = getattr(scope["app"].state, "services", None) if "app" in scope else None
        if scope["type"] != "http" or services is None or _public(scope):
            await self.app(scope, receive, send)
            return
        caller = await self._caller(scope, services.keys)
        if isinstance(caller, tuple):
            await refuse(send, scope, *caller)
            return
        if scope["path"].startswith(ADMIN_PREFIXES) and not caller.admin:
            message = "this route needs an admin API key"
            await refuse(send, scope, 403, message, "permission_denied")
            return
        state = scope.setdefault("state", {})
        state["tenant_id"] = caller.tenant_id
        state["cache_salt"] = tenant_salt(caller.tenant_id)
        state["caller"] = caller
        key = caller.key_id
        if key is None or self.max_per_key <= 0:
            await self.app(scope, receive, send)
            return
        if self.running[key] >= self.max_per_key:
            message = (
                f"this API key already has {self.max_per_key} requests running; wait for one to end"
            )
            await refuse(
                send, scope, 429, message, "too_many_requests", headers={"Retry-After": "1"}
            )
            return
        self.running[key] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.running[key] -= 1
            if self.running[key] <= 0:
                del self.running[key]

    async def _caller(self, scope: Scope, keys: KeyStore) -> Caller | tuple[int, str, str]:
        token = _bearer(scope)
        if not await self._keys_configured(keys):
            return Caller("", admin=True, key_id=None)
        if token is None:
            return 401, "this server needs an API key: send Authorization: Bearer KEY", "no_key"
        if self.static_key and secrets.compare_digest(token.encode(), self.static_key.encode()):
            return Caller("", admin=True, key_id="static")
        record = await asyncio.to_thread(keys.lookup, token)
        if record is None:
            return 401, "the API key is not valid (unknown or revoked)", "invalid_api_key"
        return Caller(record.tenant_id, record.admin, record.id)

    async def _keys_configured(self, keys: KeyStore) -> bool:
        if self.static_key:
            return True
        if self._keys_seen is None:  # the first request waits for the answer
            self._seen(await asyncio.to_thread(keys.state))
        assert self._keys_seen is not None
        checked, state = self._keys_seen
        stale = time.monotonic() - checked >= KEYS_RECHECK_S
        if stale and (self._recheck is None or self._recheck.done()):
            self._recheck = asyncio.create_task(self._check(keys))
        return state.keyed

    async def _check(self, keys: KeyStore) -> None:
        try:
            self._seen(await asyncio.to_thread(keys.state))
        except Exception:  # the database is away: keep the last answer, try again later
            log.exception("could not check for API keys")

    def _seen(self, state: KeysState) -> None:
        """Remember what the database said; say so in the log when access changed."""
        before = self._keys_seen[1] if self._keys_seen is not None else None
        self._keys_seen = (time.monotonic(), state)
        if state == before:
            return
        if state.keyed and not state.live:
            log.warning(NO_LIVE_KEY)
        elif before is None:
            return  # the start-up line said it (app/server.py)
        elif not state.keyed:
            log.warning("the API keys were removed (keys open): the server is open to everyone")
        else:
            log.info("an API key is live: clients with a key are served")


PUBLIC_PATHS = ("/health", "/v1/health")  # llama-server's public endpoints


def _public(scope: Scope) -> bool:
    """/health, and GETs that no route of the API answers (the web UI's files), as llama-server
    keeps only its health check and its UI open: /props, /models and the rest need the key."""
    path = scope["path"]
    if path in PUBLIC_PATHS:
        return True
    if scope["method"] not in ("GET", "HEAD") or path.startswith(API_PREFIXES):
        return False
    app = scope.get("app")
    routes = getattr(getattr(app, "router", None), "routes", ())
    return not any(route.matches(scope)[0] != Match.NONE for route in routes)


def _bearer(scope: Scope) -> str | None:
    headers = dict(scope["headers"])
    value = headers.get(b"authorization", b"").decode("latin-1").strip()
    if value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    api_key = headers.get(b"x-api-key", b"").decode("latin-1").strip()  # llama-server's too
    return api_key or None
