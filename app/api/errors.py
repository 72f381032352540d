"""OpenAI-style error bodies, {"error": {"message", "type", "param", "code"}}, right status."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.metrics import route_of
from app.api.outcome import RequestOutcome
from app.engine.chat_template import ChatTemplateError
from app.engine.request import RequestError

log = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    409: "conflict_error",
    405: "invalid_request_error",
    422: "invalid_request_error",
    503: "unavailable_error",
}


def error_body(
    message: str, status: int = 400, param: str | None = None, code: str | None = None
) -> dict:
    etype = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": etype, "param": param, "code": code or etype}}


def error_response(
    message: str,
    status: int = 400,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(message, status, param, code), status_code=status, headers=headers
    )


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    errors = exc.errors()
    if not errors:
        return "invalid request", None
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    if first.get("type") == "json_invalid":
        return "the request body is not valid JSON", None
    where = ".".join(loc)
    return (f"{where}: {first.get('msg')}" if where else str(first.get("msg"))), where or None


def _count_rejected(request: Request, status: int) -> None:
    """A generation request refused before it reached a slot: the responder never sees it."""
    route = route_of(request.url.path, request.method)
    services = getattr(request.app.state, "services", None)  # absent before start-up ends
    if route is not None and services is not None:
        services.metrics.observe(RequestOutcome(route=route, outcome="rejected", status=status))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        _count_rejected(request, 400)
        return error_response(message, 400, param)

    @app.exception_handler(RequestError)
    async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
        _count_rejected(request, exc.status)
        return error_response(exc.message, exc.status, exc.param, exc.code, exc.headers)

    @app.exception_handler(ChatTemplateError)
    async def _template_error(request: Request, exc: ChatTemplateError) -> JSONResponse:
        _count_rejected(request, 400)
        return error_response(str(exc), 400, "messages")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(str(exc.detail), exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response("internal server error", 500)
