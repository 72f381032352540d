"""Server state: /health and /slots (llama-server's shapes)."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter

from app.errors import error_response
from app.services import ServicesDep

router = APIRouter()


@router.get("/health")
async def health(services: ServicesDep):
    if services.engine.dead:
        return error_response("the inference engine stopped; restart the server", 503)
    slots = services.engine.slots()
    idle = sum(1 for s in slots if s.state == "idle")
    return {
        "status": "ok",
        "slots_idle": idle,
        "slots_processing": len(slots) - idle,
        "queue": services.engine.n_waiting,
    }


@router.get("/slots")
async def slots(services: ServicesDep):
    return [dataclasses.asdict(s) for s in services.engine.slots()]
