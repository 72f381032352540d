"""OpenAI-style error bodies, {"error": {"message", "type", "param", "code"}}, right status."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.anthropic.anthropic_errors import anthropic_error_response, speaks_anthropic
from app.api.llama_server.native_errors import native_error_response, speaks_native
from app.api.metrics import route_of
from app.api.outcome import RequestOutcome
from app.api.web_ui.frontend import frontend_page
from app.chat.templates.chat_template import ChatTemplateError
from app.engine.request import RequestError
from app.thread_pools import PoolBusy

log = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    409: "conflict_error",
    401: "authentication_error",
    403: "permission_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    405: "invalid_request_error",
    422: "invalid_request_error",
    501: "not_supported_error",  # llama-server's, for an endpoint turned off
    503: "unavailable_error",
}


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """Every error this API answers, OpenAI's shape (documented in the OpenAPI schema)."""

    error: ErrorDetail


# The statuses any route may answer with an error body (bad input, keys, limits, load).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (400, "Bad request: the message says what to change, `param` which field"),
        (401, "No API key, or not a valid one"),
        (403, "The route needs an admin key"),
        (404, "No such route, or no such object for this tenant"),
        (409, "Conflict (a session already generating, a busy slot)"),
        (410, "A stored file is gone"),
        (413, "The request body is over --max-body-bytes"),
        (415, "Unsupported Content-Type"),
        (429, "This key has too many requests running (see Retry-After)"),
        (500, "Internal error"),
        (503, "The server is busy (see Retry-After), shutting down, or cannot reach its database"),
        (504, "The request took longer than --timeout"),
    )
}
# Generation routes answer with a stream of server-sent events when asked to (`stream`).
STREAMING = {200: {"content": {"text/event-stream": {}}, "description": "JSON, or SSE"}}


def openapi_links(param: str, operations: dict[str, str]) -> dict[str, Any]:
    """OpenAPI links: a created object's `id` feeds these operations' `param` (clients, and
    the fuzzer's stateful phase, follow them)."""
    return {
        name: {"operationId": op, "parameters": {param: "$response.body#/id"}}
        for name, op in operations.items()
    }


def conversion_error(e: ValidationError) -> RequestError:
    """A request of another API whose conversion into a chat request failed: its first error,
    named by where it is."""
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return RequestError(f"{where}: {message}", param=where)


def error_body(
    message: str,
    status: int = 400,
    param: str | None = None,
    code: str | None = None,
    fields: dict[str, object] | None = None,
) -> dict:
    etype = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    error = {"message": message, "type": etype, "param": param, "code": code or etype}
    return {"error": {**error, **(fields or {})}}


def error_response(
    message: str,
    status: int = 400,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    fields: dict[str, object] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(message, status, param, code, fields), status_code=status, headers=headers
    )


# Pydantic's words for its error types, said plainly (its own messages name its internals).
_PLAIN = {
    "missing": "is required",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "extra_forbidden": "is not a known field",
}


def _input_path(body: Any, loc: Sequence[Any]) -> list[str | int]:
    """The part of a pydantic error location that names places in the request body.

    Pydantic puts union members and validators into locations (`str`, `list[...]`,
    `function-after[...]`, discriminator tags); only keys and indexes that the body has, and a
    missing field's own name, are places a client can find."""
    path: list[str | int] = []
    here = body
    for i, part in enumerate(loc):
        in_dict = isinstance(here, dict) and part in here
        in_list = isinstance(here, list) and isinstance(part, int) and 0 <= part < len(here)
        if in_dict or in_list:
            here = here[part]
        elif isinstance(here, dict) and i == len(loc) - 1 and isinstance(part, str):
            pass  # a missing field: the body does not have it, the client must add it
        else:
            continue
        path.append(part)
    return path


def _plain(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind in _PLAIN:
        return _PLAIN[kind]
    msg = str(error.get("msg", "is invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg[:1].lower() + msg[1:]


def _required_fields(request: Request) -> list[str]:
    route = request.scope.get("route")
    field = getattr(route, "body_field", None)
    info = getattr(field, "field_info", None)
    model = getattr(info, "annotation", None)
    fields = getattr(model, "model_fields", {})
    return [name for name, f in fields.items() if f.is_required()]


def validation_message(exc: RequestValidationError, request: Request) -> tuple[str, str | None]:
    """A plain message and the `param` it is about, from the most telling of the errors."""
    errors = list(exc.errors())
    if not errors:
        return "invalid request", None
    if errors[0].get("type") == "json_invalid":
        return "the request body is not valid JSON", None
    body = getattr(exc, "body", None)
    # A query or path parameter's error is about it, whatever the body (none, for a GET).
    about_body = errors[0].get("loc", ("body",))[0] == "body"
    if about_body and (body is None or errors[0].get("loc") == ("body",)):
        if body and errors[0].get("type") == "value_error":  # a rule across fields
            return _plain(errors[0]), None
        if body is None or body == b"" or errors[0].get("type") == "missing":
            required = _required_fields(request)
            fields = f" with {', '.join(repr(f) for f in required)}" if required else ""
            return f"the request body is empty: send a JSON object{fields}", (
                required[0] if required else None
            )
        return "the request body must be a JSON object", None
    # A union (e.g. content: string or parts) reports one error per member; a type mismatch
    # is the least telling, so an error of any other kind is preferred.
    errors.sort(key=lambda e: str(e.get("type", "")).endswith(("_type", "union_tag_invalid")))
    first = errors[0]
    loc = [p for p in first.get("loc", ()) if p not in ("body", "query", "header", "path")]
    path = _input_path(body, loc) if first.get("loc", ("",))[0] == "body" else loc
    param = ".".join(str(p) for p in path) or None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    message = _plain(first)
    return (f"{where}: {message}" if where else message), param


def _count_rejected(request: Request, status: int) -> None:
    """A generation request refused before it reached a slot: the responder never sees it."""
    route = route_of(request.url.path, request.method)
    services = getattr(request.app.state, "services", None)  # absent before start-up ends
    if route is not None and services is not None:
        services.metrics.observe(RequestOutcome(route=route, outcome="rejected", status=status))


def _shaped(
    request: Request,
    message: str,
    status: int,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    fields: dict[str, object] | None = None,
) -> JSONResponse:
    """The error in the shape of the API the route speaks (Anthropic's for /v1/messages,
    llama-server's for its native /completion)."""
    if speaks_anthropic(request.url.path):
        return anthropic_error_response(message, status, headers)
    if speaks_native(request.url.path):
        return native_error_response(message, status, headers, fields)
    return error_response(message, status, param, code, headers, fields)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = validation_message(exc, request)
        _count_rejected(request, 400)
        return _shaped(request, message, 400, param)

    @app.exception_handler(RequestError)
    async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
        _count_rejected(request, exc.status)
        return _shaped(
            request, exc.message, exc.status, exc.param, exc.code, exc.headers, exc.fields
        )

    @app.exception_handler(ChatTemplateError)
    async def _template_error(request: Request, exc: ChatTemplateError) -> JSONResponse:
        _count_rejected(request, 400)
        return _shaped(request, str(exc), 400, "messages")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        status, method, path = exc.status_code, request.method, request.url.path
        if status == 404 and exc.detail == "Not Found":  # no route has this path
            page = await frontend_page(request)
            if page is not None:
                return page
            message = f"there is no {path} on this server (see /openapi.json)"
            return error_response(message, 404, code="not_found")
        if status == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            message = f"{path} does not take {method}; it takes {allowed}"
            return _shaped(request, message, 405, code="method_not_allowed", headers=exc.headers)
        if status == 413:
            return _shaped(request, str(exc.detail), 413, code="request_too_large")
        return _shaped(request, str(exc.detail), status, headers=exc.headers)

    # The database is down, unreachable or busy: 503, so a load balancer tries another replica
    # (one that can reach it) and a client retries, instead of a 500 that says nothing can.
    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    @app.exception_handler(PoolTimeout)
    async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else exc)
        message = "the database is unavailable; try again"
        return error_response(message, 503, code="unavailable", headers={"Retry-After": "1"})

    # A worker pool's threads are all busy and its queue is full (app/thread_pools.py).
    @app.exception_handler(PoolBusy)
    async def _pool_busy(request: Request, exc: PoolBusy) -> JSONResponse:
        _count_rejected(request, 503)
        headers = {"Retry-After": "1"}
        return _shaped(request, exc.message, 503, code="unavailable", headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return _shaped(request, "internal server error", 500)
