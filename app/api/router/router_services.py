"""`RouterServices`: what the router's routes need, built at start-up (app/router_server.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

import httpx
from fastapi import Depends, Request

from app.config import Settings
from app.db.key_store import KeyStore
from app.router.model_catalog import ModelSpec
from app.router.model_router import ModelRouter
from app.router.owner_routing import OwnerRouting
from app.router.request_model import ConversationModels


@dataclass(slots=True)
class RouterServices:
    settings: Settings
    router: ModelRouter
    keys: KeyStore  # the keys the models' servers check too (app/api/middleware/auth.py)
    client: httpx.AsyncClient  # to the models' servers
    read_catalog: Callable[[], dict[str, ModelSpec]]  # --models-dir and --models-preset, now
    owners: OwnerRouting  # the model a session or collection remembers
    # Which model each resumable stream was sent to (X-Conversation-Id).
    conversations: ConversationModels = field(default_factory=ConversationModels)


def get_router_services(request: Request) -> RouterServices:
    return request.app.state.services


RouterServicesDep = Annotated[RouterServices, Depends(get_router_services)]
