"""Server state: /health, /slots (llama-server's shapes), /cache and /metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Annotated

from fastapi import APIRouter, Body, Response

from app.api.errors import error_response
from app.api.llama_server.slot_actions import SlotActions
from app.api.openai.openai_shapes import SYSTEM_FINGERPRINT
from app.api.schemas import default_params
from app.api.services import ServicesDep

router = APIRouter()

# llama-server's Process-Start-Time-Unix header on /metrics: when this server started.
PROCESS_START = int(time.time())


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
        "sleeping": services.engine.sleeping,  # the model is freed (--sleep-idle-seconds)
        "model_loaded": services.engine.loaded,  # its weights are in (not asleep, not waking)
    }


def _turned_off(what: str, flag: str) -> Response:
    return error_response(f"This server does not support {what}. Start it with `{flag}`", 501)


@router.get("/slots")
async def slots(services: ServicesDep):
    """llama-server's shapes; `session` only while that session exists, `last_used` in Unix
    seconds (null: never used)."""
    if not services.settings.slots:
        return _turned_off("slots endpoint", "--slots")
    infos = [dataclasses.asdict(s) for s in services.engine.slots()]
    named = {s["session"] for s in infos if s["session"] is not None}

    def live() -> set[str]:
        store = services.store
        return {sid for sid in named if store.get_session(sid, with_messages=False) is not None}

    alive = await asyncio.to_thread(live) if named else set()
    now_wall, now_mono = time.time(), time.monotonic()
    n_ctx = services.engine.model_info().n_ctx_request
    for s in infos:
        # llama-server's fields beside ours: a slot's own context, busy or not, its task.
        s["n_ctx"], s["is_processing"] = n_ctx, s["state"] == "processing"
        s["id_task"] = s["task_id"]
        if s["session"] not in alive:
            s["session"] = None
        used = s["last_used"]
        s["last_used"] = round(now_wall - (now_mono - used), 3) if used > 0 else None
    return infos


@router.post("/slots/{id_slot}")
async def slot_action(
    id_slot: int,
    services: ServicesDep,
    action: str = "",
    filename: Annotated[str | None, Body(embed=True)] = None,
):
    """llama-server's ?action=save|restore (body {"filename"}) and ?action=erase; served with
    --no-slots too, which turns off only the listing (as llama-server's)."""
    actions = SlotActions(services.engine, services.settings.slot_dir())
    return await actions.run(action, id_slot, filename)


@router.get("/cache")
async def cache(services: ServicesDep):
    """Host-memory entries, bytes and tokens, and hits per tier (own slot, other slot, host);
    with a projector (--mmproj) also the vision-encoder cache ("encoder", else null)."""
    stats = await services.engine.cache_stats()
    out = dataclasses.asdict(stats.tiers)
    out["encoder"] = dataclasses.asdict(stats.encoder) if stats.encoder is not None else None
    return out


@router.post("/cache/reset")
async def cache_reset(services: ServicesDep):
    """Drop every host entry and the KV of every idle slot."""
    await services.engine.reset_cache()
    return {"status": "ok"}


@router.get("/metrics", responses={200: {"content": {"text/plain": {}}, "description": "Text"}})
async def metrics(services: ServicesDep) -> Response:
    """Prometheus text exposition (kvchat_* counters, histograms and engine gauges)."""
    if not services.settings.metrics:
        return _turned_off("metrics endpoint", "--metrics")
    body, content_type = services.metrics.render()
    response = Response(body, media_type=content_type)
    # Spelled as llama-server spells it (header names are case-blind, but not every client's
    # lookup is); Starlette would lower-case a name given in `headers`.
    response.raw_headers.append((b"Process-Start-Time-Unix", str(PROCESS_START).encode()))
    return response


@router.get("/props")
async def props(services: ServicesDep):
    """llama-server's server properties: the defaults a request starts from, the slots, the
    model and its template, which endpoints are on."""
    info, settings = services.engine.model_info(), services.settings
    vocab = services.engine.tokenizer
    return {
        "default_generation_settings": {
            "params": default_params(settings.seed, settings.n_predict, settings.temperature),
            "n_ctx": info.n_ctx_request,
        },
        "total_slots": info.n_slots,
        # Document requests' KV reuse: the server's default, and what blend does on this model
        # (its k, whether it is on and why not, its measured agreement with full prefill).
        "kv_reuse": {
            "default": settings.kv_reuse,
            "blend_sink_tokens": info.blend_sink_tokens,
            "blend_available": info.blend_unavailable is None,
            "blend_reason": info.blend_unavailable,
            "blend_forced": info.blend_forced,
            "blend_agreement": info.blend_agreement,
        },
        "model_alias": services.model_name,
        "model_path": settings.model_path(),
        "modalities": {"vision": services.engine.images is not None, "audio": False},
        "endpoint_slots": settings.slots,
        "endpoint_props": False,  # no POST /props: settings do not change at run time
        "endpoint_metrics": settings.metrics,
        "chat_template": services.prompter.template.source,
        "bos_token": vocab.token_text(vocab.bos) if vocab.bos >= 0 else "",
        "eos_token": vocab.token_text(vocab.eos) if vocab.eos >= 0 else "",
        "build_info": SYSTEM_FINGERPRINT,
        # The CPU variant llama.cpp loaded (and its features) and any GPU device.
        "compute": info.compute.as_dict() if info.compute else None,
        "is_sleeping": services.engine.sleeping,
    }
