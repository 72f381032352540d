"""llama-server's /cors-proxy (GET and POST): with --ui-mcp-proxy the request goes to its `url`
(app/api/llama_server/cors_proxy.py); without, 403 as llama-server answers a feature it has off."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.llama_server.cors_proxy import forward
from app.api.services import ServicesDep

router = APIRouter()

DISABLED = {"error": {"message": "this feature is disabled", "type": "feature_disabled"}}


@router.get("/cors-proxy", include_in_schema=False)
async def proxy_get(request: Request, services: ServicesDep):
    if not services.settings.ui_mcp_proxy:
        return JSONResponse(DISABLED, status_code=403)
    return await forward(request, "GET", services.outbound, services.settings.request_timeout)


@router.post("/cors-proxy", include_in_schema=False)
async def proxy_post(request: Request, services: ServicesDep):
    if not services.settings.ui_mcp_proxy:
        return JSONResponse(DISABLED, status_code=403)
    return await forward(request, "POST", services.outbound, services.settings.request_timeout)
