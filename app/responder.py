"""Turns an engine stream into an HTTP response: SSE when streaming, one JSON object otherwise.

A client that goes away cancels its task: the slot is freed at once and keeps its KV for reuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from app.engine.engine import Engine
from app.engine.events import Failed, Finished, TextDelta
from app.engine.request import GenerationRequest
from app.engine.stream import EngineStream
from app.errors import error_body, error_response
from app.responses import Envelope, Shape, usage
from app.schemas import GenerationFields


def _sse(obj: dict[str, Any] | str) -> str:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return f"data: {data}\n\n"


async def _watch_disconnect(http: Request, stream: EngineStream) -> None:
    while not await http.is_disconnected():
        await asyncio.sleep(0.25)
    stream.cancel()


async def respond(
    engine: Engine,
    request: GenerationRequest,
    body: GenerationFields,
    shape: Shape,
    model_name: str,
    http: Request,
) -> JSONResponse | StreamingResponse:
    stream = engine.open(request)  # raises RequestError before anything is sent
    envelope = Envelope(shape, model_name)
    if body.stream:
        return StreamingResponse(
            _stream(stream, envelope, body.include_usage(), http),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    watcher = asyncio.create_task(_watch_disconnect(http, stream))
    try:
        parts: list[str] = []
        logprobs = [] if request.logprobs is not None else None
        async for event in stream:
            if isinstance(event, TextDelta):
                parts.append(event.text)
                if logprobs is not None and event.logprobs:
                    logprobs.extend(event.logprobs)
            elif isinstance(event, Finished):
                return JSONResponse(envelope.whole("".join(parts), event, logprobs))
            elif isinstance(event, Failed):
                return error_response(event.message, event.status, code=event.code)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return error_response("generation ended without a result", 500)


async def _stream(
    stream: EngineStream, envelope: Envelope, include_usage: bool, http: Request
) -> AsyncIterator[str]:
    shape = envelope.shape
    watcher = asyncio.create_task(_watch_disconnect(http, stream))
    try:
        opening = shape.opening()
        if opening is not None:
            yield _sse(envelope.chunk(opening))
        offset = 0  # characters sent so far (the legacy logprobs shape wants text offsets)
        async for event in stream:
            if isinstance(event, TextDelta):
                lp = shape.logprobs(event.logprobs, offset) if event.logprobs is not None else None
                yield _sse(envelope.chunk(shape.delta(event.text, lp)))
                offset += len(event.text)
            elif isinstance(event, Finished):
                yield _sse(
                    envelope.chunk(
                        shape.closing(event.finish_reason), timings=event.timings.as_dict()
                    )
                )
                if include_usage:
                    yield _sse(envelope.chunk(None, usage=usage(event)))
            elif isinstance(event, Failed):
                yield _sse(error_body(event.message, event.status, code=event.code))
        yield _sse("[DONE]")
    finally:
        stream.cancel()  # no-op when finished; frees the slot when the client went away
        watcher.cancel()
