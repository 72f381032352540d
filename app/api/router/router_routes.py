"""The router's routes: `/models` (llama-server's shape: every model with its status),
`/models/load` and `/models/unload`, its `/props` (`role: router`) and `/health`; every other
request goes to the server of the model it names (app/router/router_proxy.py), else, under a
session, a collection or a document, of the model that remembers (app/router/owner_routing.py),
loaded first if it is not (unless `--no-models-autoload`, or `?autoload=false`)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse, Response

from app.api.errors import error_response
from app.api.middleware.auth import tenant_of
from app.api.openai.openai_shapes import SYSTEM_FINGERPRINT
from app.api.router.router_services import RouterServices, RouterServicesDep
from app.api.web_ui.frontend import frontend_page
from app.router.model_router import ModelEntry, RouterError
from app.router.owner_routing import owner_of
from app.router.request_model import CONVERSATION_HEADER, STREAM_PATHS, named_model, needs_model
from app.router.router_proxy import forward

router = APIRouter()
ModelName = Annotated[str, Body(embed=True, alias="model")]


def refused(e: RouterError) -> JSONResponse:
    return error_response(str(e), e.status, "model" if e.status == 400 else None, e.code)


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/v1/models")
@router.get("/models")
async def models(request: Request, services: RouterServicesDep) -> dict[str, Any]:
    if request.query_params.get("reload"):  # the models dir and the preset read again
        await services.router.reload(services.read_catalog())
    now = int(time.time())
    return {"object": "list", "data": [_model(e, now) for e in services.router.entries()]}


def _model(entry: ModelEntry, now: int) -> dict[str, Any]:
    status: dict[str, Any] = {"value": entry.status, "args": entry.spec.args()}
    if entry.failure is not None:
        status.update(failed=True, reason=entry.failure)
    inputs = ["text", "image"] if entry.spec.mmproj else ["text"]
    return {
        "id": entry.name,
        "aliases": [],
        "tags": [],
        "object": "model",
        "owned_by": "llamacpp",
        "created": now,
        "status": status,
        "architecture": {"input_modalities": inputs, "output_modalities": ["text"]},
        "source": "local",
        "in_flight": entry.in_flight,
        "load_seconds": entry.load_seconds,
    }


@router.delete("/models")
async def forget(model: str, services: RouterServicesDep) -> Response:
    """llama-server's removal of a downloaded model: here the model leaves the list until the
    next `?reload=1` (nothing is downloaded, and no file is deleted through the API)."""
    try:
        await services.router.forget(model)
    except RouterError as e:
        return refused(e)
    return JSONResponse({"success": True})


@router.post("/models")
async def download() -> Response:
    """llama-server downloads a model here; this server downloads nothing (no network)."""
    return error_response("models are not downloaded here: put the GGUF in --models-dir", 501)


@router.post("/models/load")
async def load(model: ModelName, services: RouterServicesDep) -> Response:
    try:
        await services.router.load(model)
    except RouterError as e:
        return refused(e)
    return JSONResponse({"success": True})


@router.post("/models/unload")
async def unload(model: ModelName, services: RouterServicesDep) -> Response:
    try:
        await services.router.unload(model)
    except RouterError as e:
        return refused(e)
    return JSONResponse({"success": True})


@router.get("/props")
async def props(request: Request, services: RouterServicesDep) -> Response:
    if request.query_params.get("model"):  # that model's own /props
        return await proxy(request, services)
    settings = services.settings
    return JSONResponse(
        {
            "role": "router",
            "max_instances": services.router.max_loaded,
            "models_autoload": services.router.autoload,
            "model_alias": "kvchat",
            "model_path": "none",
            "default_generation_settings": {"params": {}, "n_ctx": 0},
            "build_info": SYSTEM_FINGERPRINT,
            "cors_proxy_enabled": settings.ui_mcp_proxy,
            "is_sleeping": False,
        }
    )


PROXIED = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


@router.api_route("/{path:path}", methods=PROXIED, include_in_schema=False)
async def proxy(request: Request, services: RouterServicesDep) -> Response:
    if request.method in ("GET", "HEAD") and (page := await frontend_page(request)) is not None:
        return page  # the web UI's files are the router's own
    if request.url.path.rstrip("/") in STREAM_PATHS:
        return await _stream(request, services)
    body = await request.body()
    name = named_model(body, request.query_params.get("model"))
    autoload = request.query_params.get("autoload")
    models = services.router
    runs_model = needs_model(request.method, request.url.path)
    owner = owner_of(request.url.path)
    try:
        if name is None and owner is not None:  # a session or collection: its model's
            name = await services.owners.model_for(owner, tenant_of(request), runs_model)
        if name is None:  # what is under a session or collection goes where it is, if it is
            name = models.default_model(required=runs_model and owner is None)
        entry = await models.acquire(name, None if autoload is None else autoload in ("1", "true"))
    except RouterError as e:
        return refused(e)
    assert entry.child is not None
    if (conv := _conversation(request)) and request.method == "POST":
        services.conversations.remember(conv, entry.name)  # its stream is kept there
    try:
        return await forward(
            services.client, request, body, entry.child.base_url, lambda: models.release(entry)
        )
    except RouterError as e:
        return refused(e)


def _conversation(request: Request) -> str | None:
    # The header's UTF-8 bytes, as the model's server reads them (and the query's conv_id).
    raw = next(
        (v for k, v in request.headers.raw if k.lower() == CONVERSATION_HEADER.encode()), b""
    )
    return raw.decode("utf-8", "replace") or None


async def _stream(request: Request, services: RouterServices) -> Response:
    """GET/DELETE /v1/stream: to the server its conversation was sent to, where the stream is
    kept (asleep or not: reading it loads no model)."""
    name = services.conversations.model_of(request.query_params.get("conv_id", ""))
    entry = services.router.models.get(name or "")
    if entry is None or entry.child is None or not entry.child.running:
        if request.method == "DELETE":
            return Response(status_code=204)  # nothing to stop, as for an unknown id
        return error_response("Stream not found or expired", 404, "conv_id", "not_found")

    async def nothing() -> None:
        return None

    try:
        return await forward(services.client, request, b"", entry.child.base_url, nothing)
    except RouterError as e:
        return refused(e)
