"""Anthropic's error shape, {"type": "error", "error": {"type", "message"}}, for the routes
that speak its API (`/v1/messages`); every other route answers in OpenAI's (app/api/errors.py)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

ANTHROPIC_PREFIX = "/v1/messages"

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


class AnthropicErrorDetail(BaseModel):
    type: str
    message: str


class AnthropicErrorResponse(BaseModel):
    """Every error of the Anthropic routes (documented in the OpenAPI schema)."""

    type: str
    error: AnthropicErrorDetail


def speaks_anthropic(path: str) -> bool:
    return path == ANTHROPIC_PREFIX or path.startswith(ANTHROPIC_PREFIX + "/")


def anthropic_error_body(message: str, status: int = 400) -> dict[str, Any]:
    kind = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_error_response(
    message: str, status: int = 400, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(anthropic_error_body(message, status), status_code=status, headers=headers)
