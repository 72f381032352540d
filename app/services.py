"""`Services`: what the routes need, built once at start-up and kept on `app.state`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.config import Settings
from app.db.store import Store
from app.engine.engine import Engine
from app.metrics import Metrics
from app.prompter import Prompter
from app.turn_cache import TurnCache


@dataclass(slots=True)
class Services:
    settings: Settings
    engine: Engine
    prompter: Prompter
    model_name: str
    metrics: Metrics
    store: Store  # sessions, messages, media (app/db)
    turns: TurnCache  # exact tokens of recent chat replies


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]
