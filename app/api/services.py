"""`Services`: what the routes need, built once at start-up and kept on `app.state`."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from app.api.llama_server.stream_store import StreamStore
from app.api.metrics import Metrics
from app.chat.chat_turn import ChatTurns
from app.chat.sessions.response_sessions import ResponseSessions
from app.chat.sessions.stored_turns import StoredTurns
from app.chat.templates.prompter import Prompter
from app.config import Settings
from app.db.key_store import KeyStore
from app.db.store import Store
from app.docs.document_service import Documents
from app.docs.questions.doc_questions import DocQuestions
from app.engine.engine import Engine
from app.engine.request import RequestError
from app.media.media_store import MediaStore
from app.outbound.outbound_http import Outbound
from app.thread_pools import ThreadPools


@dataclass(slots=True)
class Services:
    settings: Settings
    engine: Engine
    prompter: Prompter
    model_name: str
    metrics: Metrics
    store: Store  # sessions, messages, media (app/db)
    chats: ChatTurns  # chat turns from messages, and the steps every turn shares (app/chat)
    stored: StoredTurns  # turns of stored sessions: session messages, stored responses
    responses: ResponseSessions  # the Responses API's stored responses
    media: MediaStore | None  # uploaded images (POST /v1/media); None: 503
    documents: Documents | None  # collections, ingestion, retrieval; None: 503
    questions: DocQuestions | None  # search, /ask, `rag` sources (with `documents`)
    keys: KeyStore  # API keys (app/api/middleware/auth.py)
    streams: StreamStore  # streams sent with X-Conversation-Id, readable again (GET /v1/stream)
    pools: ThreadPools  # worker threads by kind of work (app/thread_pools.py)
    outbound: Outbound  # requests to other hosts: /cors-proxy, remote images (app/outbound/)
    # Responses whose end hooks have not run yet (app/api/end_hooks.py); shutdown waits for them.
    inflight: set[object] = field(default_factory=set)

    def remembered_model(self, asked: str | None) -> str:
        """The model name a new session or collection remembers: this server's own. `asked`
        (the request's `model`) must be one of its names (a router sends a request that names
        a model to that model's server); 400 otherwise."""
        if asked is not None and asked not in (self.model_name, *self.settings.model_aliases()):
            raise RequestError(
                f"model {asked!r} is not served here; this server serves {self.model_name!r}",
                param="model",
                code="model_not_found",
            )
        return self.model_name

    async def drained(self, timeout: float) -> bool:
        """Wait until every response has recorded its end; False if time ran out."""
        deadline = time.monotonic() + timeout
        while self.inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return not self.inflight


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]
