"""llama-server's error shape, {"error": {"code": <status>, "message", "type"}}, for the routes
that speak its native API (`/completion`, `/completions`); the OpenAI routes answer in OpenAI's
(app/api/errors.py), whose `code` is a word, not the status."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

NATIVE_PATHS = ("/completion", "/completions")

# llama-server's error types by status (its error_type names).
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    501: "not_supported_error",
    503: "unavailable_error",
}


class NativeErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")  # e.g. n_prompt_tokens, n_ctx of a long prompt

    code: int
    message: str
    type: str


class NativeErrorResponse(BaseModel):
    """Every error of the native routes (documented in the OpenAPI schema)."""

    error: NativeErrorDetail


def speaks_native(path: str) -> bool:
    return path.rstrip("/") in NATIVE_PATHS


def native_error_body(
    message: str, status: int = 400, fields: dict[str, object] | None = None
) -> dict[str, object]:
    """The error; `fields`: more of it (e.g. `n_prompt_tokens`, `n_ctx` of a long prompt)."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"code": status, "message": message, "type": kind, **(fields or {})}}


def native_error_response(
    message: str,
    status: int = 400,
    headers: dict[str, str] | None = None,
    fields: dict[str, object] | None = None,
) -> JSONResponse:
    body = native_error_body(message, status, fields)
    return JSONResponse(body, status_code=status, headers=headers)
