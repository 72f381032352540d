"""The router's FastAPI application (`--models-dir` or `--models-preset`): no model of its own,
a server per model behind it (app/router), the web UI, and the same keys, CORS and browser
checks as a model's server.

Every model's server gets the router's flags but its own (the models, the address, the data
directory), the model's flags, the router's database (sessions, media, documents and keys are
shared: a conversation is served by whichever model it names, else by the one it remembers), a
data directory of its own under the router's (`models/<name>`), and --docs-own-model (it ingests
the documents of its own model's collections only).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI

from app.api.errors import ERROR_RESPONSES, install_error_handlers
from app.api.middleware.access import add_access_checks, add_cors
from app.api.router import router_routes
from app.api.router.router_services import RouterServices
from app.api.web_ui.frontend import install_frontend
from app.config import Settings
from app.db.key_store import KeyStore
from app.db.remembered_models import RememberedModels
from app.db.store import Store
from app.router.child_server import ChildServer
from app.router.model_catalog import ModelSpec, catalog
from app.router.model_router import ModelRouter
from app.router.owner_routing import OwnerRouting
from app.setting import settings_info

log = logging.getLogger(__name__)

# The router's own flags, and what each model's server gets from the router instead.
NOT_FOR_CHILDREN = {"models_dir", "models_preset", "models_max", "models_autoload", "host"}
NOT_FOR_CHILDREN |= {"port", "data_dir", "database_url", "model", "mmproj", "model_alias", "ui"}
NOT_FOR_CHILDREN |= {"replica_name", "docs_own_model"}


def child_argv(argv: list[str], settings: Settings, spec: ModelSpec) -> list[str]:
    """A model's server's flags: the router's own but those in NOT_FOR_CHILDREN, then its own."""
    own = _without(argv, NOT_FOR_CHILDREN)
    data = Path(settings.data_dir).resolve() / "models" / _safe(spec.name)
    return [
        *own,
        *spec.args(),
        *("--alias", spec.name, "--no-ui", "--data-dir", str(data)),
        *("--database-url", settings.database(), "--replica-name", spec.name),
        "--docs-own-model",  # other models' servers share the database: their documents
    ]


def _without(argv: list[str], names: set[str]) -> list[str]:
    """`argv` without the flags of the settings `names` (and the values they take)."""
    takes_value: dict[str, bool] = {}
    for info in settings_info(Settings):
        if info.name in names:
            takes_value.update({f: info.bool_action is None for f in info.all_flags})
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in takes_value:
            skip = takes_value[flag] and "=" not in arg
            continue
        out.append(arg)
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


def create_router_app(settings: Settings, argv: list[str]) -> FastAPI:
    specs = catalog(settings.models_dir, settings.models_preset)
    logs = Path(settings.data_dir).resolve() / "models"

    def make_child(spec: ModelSpec) -> ChildServer:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        return ChildServer(
            spec.name, child_argv(argv, settings, spec), logs / f"{_safe(spec.name)}.log", env
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = Store(settings.database())
        store.migrate()  # once, here: the models' servers start on a current schema
        router = ModelRouter(specs, settings.models_max, settings.models_autoload, make_child)
        client = httpx.AsyncClient()
        app.state.services = RouterServices(
            settings,
            router,
            KeyStore(store),
            client,
            lambda: catalog(settings.models_dir, settings.models_preset),
            OwnerRouting(RememberedModels(store), router),
        )
        names = ", ".join(specs) or "none"
        log.info(
            "router mode: %d models (%s), at most %d loaded", len(specs), names, router.max_loaded
        )
        try:
            yield
        finally:
            await router.close()
            await client.aclose()
            store.close()

    app = FastAPI(title="kvchat router", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    add_access_checks(app, settings)  # the models' servers check the key again
    add_cors(app, settings)
    if settings.ui:
        install_frontend(app)
    app.include_router(router_routes.router, responses=ERROR_RESPONSES)
    return app
