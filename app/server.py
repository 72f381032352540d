"""FastAPI application factory: builds the engine at start-up and tears it down at shutdown."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api.anthropic import anthropic_routes
from app.api.errors import ERROR_RESPONSES, install_error_handlers
from app.api.kvchat import (
    collection_routes,
    document_routes,
    media_routes,
    search_routes,
    session_message_routes,
    session_routes,
)
from app.api.llama_server import (
    completion_routes,
    cors_proxy_routes,
    stream_routes,
    system_routes,
    token_routes,
)
from app.api.llama_server.stream_store import StreamLimits, StreamStore
from app.api.metrics import EngineGauges, Metrics
from app.api.middleware.access import add_access_checks, add_cors
from app.api.middleware.arrival_tickets import ArrivalTickets
from app.api.middleware.auth import tenant_salt
from app.api.middleware.idempotent_writes import IdempotentWrites
from app.api.middleware.json_bodies import JsonBodies
from app.api.middleware.replica_header import ReplicaHeader
from app.api.openai import embedding_routes, openai_routes
from app.api.responses import responses_routes
from app.api.services import Services
from app.api.web_ui.frontend import install_frontend
from app.chat.chat_turn import ChatTurns
from app.chat.image_work import ImageWork
from app.chat.sessions.response_sessions import ResponseSessions
from app.chat.sessions.session_writes import SessionWrites
from app.chat.sessions.stored_turns import StoredTurns
from app.chat.sessions.turn_cache import TurnCache
from app.chat.templates.prompter import Prompter
from app.config import Settings
from app.db.key_store import KeyStore
from app.db.store import Store
from app.docs.document_service import Documents
from app.docs.questions.doc_questions import DocQuestions
from app.engine.engine import Engine
from app.media.media_store import MediaStore, media_root
from app.outbound.address_policy import OutboundPolicy
from app.outbound.outbound_http import Outbound
from app.outbound.resolver import pool_resolver
from app.thread_pools import ThreadPools

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

        def gauges() -> EngineGauges:  # read at scrape time, once the engine runs
            slots = engine.slots()
            busy = sum(1 for s in slots if s.state != "idle")
            bg, pending = engine.background_tasks(), docs.background_pending()
            # Document requests not handed to the engine yet wait too.
            waiting = {kind: n + pending.get(kind, 0) for kind, n in bg.queued.items()}
            d = engine.decode_counts()
            return EngineGauges(
                len(slots),
                busy,
                engine.n_waiting,
                engine.n_arriving,
                bg.yielding,
                background_queued=waiting,
                background_running=bg.running,
                background_completed=bg.completed,
                n_decode=d.n_decode,
                n_busy_slots=d.n_busy_slots,
                n_draft_steps=d.n_draft_steps,
            )

        metrics = Metrics(gauges)
        engine = Engine(config, on_cache_op=metrics.observe_cache_op)
        engine.start()
        prompter = Prompter(engine.tokenizer, settings.template_choice(), settings.reasoning)
        pools = ThreadPools.build(
            settings.parse_threads,
            settings.image_threads,
            settings.fetch_threads,
            settings.pool_queue,
        )
        outbound = Outbound(
            OutboundPolicy.from_list(settings.fetch_allow_hosts), pool_resolver(pools.fetch)
        )
        docs = Documents.build(settings, store, engine, prompter, tenant_salt, pools.parse)
        docs.start()
        media = MediaStore(media_root(settings), store)
        media.import_files()  # uploads from before the database held media bytes
        questions = DocQuestions(docs, engine, settings.kv_reuse)
        keys = KeyStore(store)
        images = ImageWork(settings, media, pools.images, outbound)
        chats = ChatTurns(engine, prompter, settings, store, TurnCache(), media, questions, images)
        # One turn of a session at a time on every replica, held as long as --idempotency-lease.
        lease = settings.idempotency_lease
        writes = SessionWrites(store, settings.replica(), lease, settings.request_timeout)
        stored = StoredTurns(chats, writes)
        app.state.services = Services(
            settings,
            engine,
            prompter,
            settings.model_name(),
            metrics,
            store,
            chats,
            stored,
            ResponseSessions(store, stored, settings.model_name()),
            media=media,
            documents=docs,
            questions=questions,
            keys=keys,
            streams=StreamStore(
                StreamLimits(
                    settings.streams_per_tenant,
                    settings.streams_max,
                    settings.stream_max_bytes,
                    settings.stream_ttl,
                )
            ),
            pools=pools,
            outbound=outbound,
        )
        _say_if_open(settings, keys)
        _on_router_signals(engine)
        try:
            yield
        finally:
            docs.stop()  # before the model goes: the worker tokenizes with it
            # Requests still running fail (503); their responses record what they got, which
            # may read the model (token checks): free it only once they are done.
            engine.stop(free=False)
            await app.state.services.drained(timeout=10.0)
            app.state.services.streams.close()  # what is left stops; readers are woken
            engine.close()
            pools.shutdown()
            store.close()

    app = FastAPI(title="kvchat", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    # Innermost: a body without a JSON content type is read as JSON, as llama-server does.
    app.add_middleware(JsonBodies)
    # A keyed write's tenant is known and its body within the limit.
    app.add_middleware(IdempotentWrites, settings=settings)
    add_access_checks(app, settings)  # body limit, keys, Host and Origin
    app.add_middleware(ReplicaHeader, name=settings.replica())  # on every answer, errors too
    # Then: a generation request counts as arriving before anything else is done with it.
    app.add_middleware(ArrivalTickets)
    add_cors(app, settings)
    routers = (  # in this order: the OpenAPI schema lists paths as they were added
        openai_routes,
        completion_routes,
        cors_proxy_routes,
        session_routes,
        session_message_routes,
        system_routes,
        stream_routes,
        token_routes,
        media_routes,
        collection_routes,
        document_routes,
        search_routes,
        embedding_routes,
        anthropic_routes,
        responses_routes,
    )
    for module in routers:
        app.include_router(module.router, responses=ERROR_RESPONSES)
    if settings.ui:
        install_frontend(app)  # the built UI, for GETs no route takes
    return app


def _say_if_open(settings: Settings, keys: KeyStore) -> None:
    """An open server says so at start-up, loudly when others can reach it."""
    if settings.api_key or keys.state().keyed:  # revoked keys too: keys fail closed
        log.info("API keys are required (all routes but /health and the web UI)")
        return
    if all(ipaddress.ip_address(_resolve(h)).is_loopback for h in settings.hosts()):
        log.warning("no API keys: every local client can use every route (see `keys create`)")
    else:
        log.critical(
            "NO API KEYS and bound to %s: anyone who can reach this port can read every "
            "session and use every route; create a key with `python -m app keys create` "
            "or pass --api-key",
            settings.host,
        )


def _on_router_signals(engine: Engine) -> None:
    """A router's control of its model servers (app/router/child_server.py): SIGUSR1 puts the
    model to sleep as soon as it is idle (the router's unload), SIGUSR2 wakes it. Signals, not
    routes: only the machine's own processes can send them, and no key is needed."""
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task] = set()  # a sleep waiting for the requests to end

    async def sleep_when_idle() -> None:
        while not engine.sleeping:  # awake, or waking (it sleeps once it has woken)
            try:
                await engine.sleep()
            except RuntimeError:  # requests run: try again once they may have ended
                await asyncio.sleep(0.1)

    def unload() -> None:
        task = loop.create_task(sleep_when_idle())
        pending.add(task)
        task.add_done_callback(pending.discard)

    def wake() -> None:  # a wake cancels the sleep asked for before it
        for task in list(pending):
            task.cancel()
        engine.touch()

    loop.add_signal_handler(signal.SIGUSR1, unload)
    loop.add_signal_handler(signal.SIGUSR2, wake)


def _resolve(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return "127.0.0.1" if host == "localhost" else "0.0.0.0"
