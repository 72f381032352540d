"""The checks every kind of server puts in front of its routes, configured once from the settings:
the body limit, the API key, the browser checks (Host, Origin) and CORS. A model's server
(app/server.py) and the router (app/router_server.py) add them in the same order; a model's
server adds its own around them."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from starlette.types import Scope

from app.api.middleware.auth import Auth
from app.api.middleware.body_limit import BodyLimit, largest_body
from app.api.middleware.browser_guard import BrowserGuard, host_policy
from app.api.middleware.cors import Cors, CorsPolicy, default_origins
from app.config import Settings


def cors_policy(settings: Settings) -> CorsPolicy:
    origins = default_origins(settings.cors_origins, settings.api_key)
    return CorsPolicy(
        origins, settings.cors_credentials, settings.cors_methods, settings.cors_headers
    )


def body_limit(settings: Settings) -> Callable[[Scope], int]:
    """--max-body-bytes; media uploads may be as large as `largest_body`."""
    upload = largest_body(settings)

    def limit_for(scope: Scope) -> int:
        is_upload = scope["method"] == "POST" and scope["path"].rstrip("/") == "/v1/media"
        return upload if is_upload else settings.max_body_bytes

    return limit_for


def add_access_checks(app: FastAPI, settings: Settings) -> None:
    """Body limit, keys and the browser checks; the key check runs before a byte of the body is
    read, the browser checks before the key check (a page in a browser gets nothing)."""
    app.add_middleware(BodyLimit, limit_for=body_limit(settings))
    app.add_middleware(
        Auth, static_key=settings.api_key, max_per_key=settings.max_concurrent_per_key
    )
    app.add_middleware(
        BrowserGuard,
        hosts=host_policy(settings.allowed_hosts, settings.hosts()),
        cors=cors_policy(settings),
    )


def add_cors(app: FastAPI, settings: Settings) -> None:
    """Outermost, outside the key check: a browser's preflight carries no key (llama-server's
    order)."""
    app.add_middleware(Cors, policy=cors_policy(settings))
