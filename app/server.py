"""FastAPI application factory: builds the engine at start-up and tears it down at shutdown."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api.errors import install_error_handlers
from app.api.metrics import EngineGauges, Metrics
from app.api.routes import documents, media, openai, sessions, system, tokens
from app.api.services import Services
from app.api.ui_files import mount_ui
from app.chat.prompter import Prompter
from app.chat.turn_cache import TurnCache
from app.config import Settings
from app.db.store import Store
from app.docs.documents import Documents
from app.engine.engine import Engine
from app.media.media_store import MediaStore, media_root

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        config = settings.engine_config()
        log.info(
            "loading model %s (ctx %d, %d slots)",
            config.model_path,
            config.n_ctx,
            config.n_parallel,
        )
        store = Store(settings.database())
        store.migrate()  # Alembic upgrade head: the schema is current before anything is served
        engine = Engine(config)
        engine.start()

        def gauges() -> EngineGauges:
            slots = engine.slots()
            busy = sum(1 for s in slots if s.state != "idle")
            return EngineGauges(len(slots), busy, engine.n_waiting)

        metrics = Metrics(gauges)
        engine.reuse.on_op = metrics.observe_cache_op
        app.state.services = Services(
            settings,
            engine,
            Prompter(engine.model),
            settings.model_name(),
            metrics,
            store,
            TurnCache(),
        )
        app.state.services.media = MediaStore(media_root(settings), store)
        docs = Documents.build(settings, store, engine.model, app.state.services.prompter)
        docs.start()
        app.state.services.documents = docs
        try:
            yield
        finally:
            docs.stop()  # before the model goes: the worker tokenizes with it
            # Requests still running fail (503); their responses record what they got, which
            # may read the model (token checks): free it only once they are done.
            engine.stop(free=False)
            await app.state.services.drained(timeout=10.0)
            engine.close()
            store.close()

    app = FastAPI(title="kvchat", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(openai.router)
    app.include_router(sessions.router)
    app.include_router(system.router)
    app.include_router(tokens.router)
    app.include_router(media.router)
    app.include_router(documents.router)
    mount_ui(app)
    return app
