"""llama-server's resumable streams: `GET /v1/stream?conv_id=..&from=N` reads a stream again,
`DELETE /v1/stream?conv_id=..` stops it, `POST /v1/streams/lookup` says which of the named
conversations have one.

A streamed request sent with `X-Conversation-Id` keeps its SSE bytes (app/api/llama_server/
stream_store.py); `from` counts bytes of that stream, as llama-server's (its web UI resumes
from the bytes it had). The id travels in the query string, as llama-server's: it may hold a
model name with slashes. Everything is the caller's tenant's only: another tenant's stream is
not found (404), not stopped (204 all the same), not listed.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.errors import error_response
from app.api.llama_server.stream_store import MAX_LOOKUP_IDS
from app.api.middleware.auth import tenant_of
from app.api.services import ServicesDep

router = APIRouter()

NOT_FOUND = "Stream not found or expired"  # llama-server's words


class StreamLookup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation_ids: list[str] = Field(default_factory=list, max_length=MAX_LOOKUP_IDS)


class StreamInfo(BaseModel):
    conversation_id: str
    is_done: bool
    total_bytes: int  # bytes the stream ever had: a reader that got them all resumes from here
    started_at: int  # Unix seconds
    completed_at: int  # Unix seconds; 0 while it runs


def _missing_id() -> Response:
    return error_response("conv_id is required: the stream's X-Conversation-Id", param="conv_id")


@router.get("/v1/stream", responses={200: {"content": {"text/event-stream": {}}}})
async def read_stream(
    services: ServicesDep,
    http: Request,
    conv_id: str = "",
    start: Annotated[int, Query(alias="from", ge=0)] = 0,
) -> Response:
    """The stream's SSE bytes from byte `from` on: those kept, then the rest as it is
    generated, until it ends."""
    if not conv_id:
        return _missing_id()
    stream = services.streams.get(tenant_of(http), conv_id)
    if stream is None:
        return error_response(NOT_FOUND, 404, param="conv_id", code="not_found")
    if stream.pending:
        message = "the stream's generation has not started yet (its model is loading); retry"
        return error_response(message, 503, code="unavailable", headers={"Retry-After": "1"})
    if start < stream.dropped:
        message = (
            f"Stream offset lost, please restart: its first {stream.dropped} bytes are no "
            f"longer kept (--stream-max-bytes); read from {stream.dropped} or later"
        )
        return error_response(message, 400, param="from", code="stream_offset_lost")
    return stream.response(start)


@router.delete("/v1/stream", status_code=204)
async def stop_stream(services: ServicesDep, http: Request, conv_id: str = "") -> Response:
    """Stop the stream's generation and forget it (204 also when there is none)."""
    if not conv_id:
        return _missing_id()
    services.streams.stop(tenant_of(http), conv_id)
    return Response(status_code=204)


@router.post("/v1/streams/lookup")
async def lookup_streams(
    body: StreamLookup, services: ServicesDep, http: Request
) -> list[StreamInfo]:
    """The caller's streams of these conversations (each id also names `<id>::<model>`); never
    any it did not ask about."""
    ids = [i for i in body.conversation_ids if i]
    return [
        StreamInfo(
            conversation_id=s.conv_id,
            is_done=s.done,
            total_bytes=s.total,
            started_at=s.started_at,
            completed_at=s.completed_at,
        )
        for s in services.streams.lookup(tenant_of(http), ids)
    ]
