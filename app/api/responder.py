"""Turns an engine stream into an HTTP response: SSE when streaming, one JSON object otherwise.

A client that goes away cancels its task: the slot is freed at once and keeps its KV for reuse.
Not so a stream sent with `X-Conversation-Id`: it runs to its end in a task of its own and is
kept for readers (app/api/llama_server/stream_buffer.py), its client one of them.
Every request that ran ends in exactly one call of its end hooks (app/api/end_hooks.py), also
when the client went away or the server shut down. The hooks run before the last chunk is sent,
so a client that saw the end finds it recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from app.api.end_hooks import EndHook, Ending
from app.api.errors import error_body, error_response
from app.api.event_writer import EventWriter, KeepsDeltas
from app.api.llama_server.stream_buffer import SSE_HEADERS
from app.api.middleware.idempotent_writes import mark_unfinished
from app.api.openai.openai_shapes import Envelope, Shape, usage
from app.api.reply_parts import ReplyParts, with_reasoning
from app.api.schemas import GenerationFields
from app.api.services import Services
from app.chat.templates.reasoning import Thinking
from app.chat.turn import TurnRecorder, TurnResult
from app.engine.events import Failed, Finished, TextDelta
from app.engine.request import GenerationRequest
from app.engine.stream import EngineStream


@dataclass(slots=True)
class Reply:
    """How to answer one request: its shape, route name, and what to run when it ends."""

    shape: Shape
    route: str  # "chat" | "completion" | "session" (metrics label)
    on_end: list[EndHook] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # fields on every response object
    # Fields sent first in a stream, in a chunk of their own (e.g. a document answer's
    # citations), and put on the whole object when not streaming.
    prelude: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)  # added to the engine's timings
    # The whole (non-streamed) object, reshaped for routes with a shape of their own (/ask).
    reshape: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Writes the reply instead of `shape` (tool calls, other APIs' shapes); see event_writer.py.
    writer: EventWriter | None = None
    # A chat reply's reasoning split (app/chat/templates/reasoning.py); None: the text as it comes.
    thinking: Thinking | None = None
    # Fields made from the whole text once it is complete (a full-mode answer's citations):
    # sent in a chunk of their own after the closing one when streaming, put on the whole
    # object otherwise.
    epilogue: Callable[[str], dict[str, Any]] | None = None


def _sse(obj: dict[str, Any] | str) -> str:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return f"data: {data}\n\n"


async def _watch_disconnect(http: Request, stream: EngineStream) -> None:
    while not await http.is_disconnected():
        await asyncio.sleep(0.25)
    stream.cancel()


def _marks_unfinished(http: Request) -> EndHook:
    def mark(result: TurnResult) -> None:
        if result.status != "complete":
            mark_unfinished(http)

    return mark


async def _settle(ending: Ending, watcher: asyncio.Task) -> None:
    """An unstreamed response is over, however it ended: its hooks ran, nobody watches."""
    ending()
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher


class _GuardedStream(StreamingResponse):
    """A stream whose clean-up runs when the response ends however it ends: a task cancelled
    while awaiting a slow client's socket leaves the generator suspended, never closed."""

    def __init__(self, content: AsyncIterator[str], on_close: Callable[[], object], **kw) -> None:
        super().__init__(content, **kw)
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


async def respond(
    services: Services,
    request: GenerationRequest,
    body: GenerationFields,
    reply: Reply,
    http: Request,
) -> JSONResponse | StreamingResponse:
    rec = TurnRecorder()
    # Raises RequestError before anything is sent. Unstreamed: the text comes with the end.
    # Its arrival ticket (app/api/middleware/arrival_tickets.py) is settled as the task is queued.
    arrival = getattr(http.state, "arrival", None)
    # A stream sent with X-Conversation-Id is kept, readable again (GET /v1/stream): its
    # generation outlives its client. Refused (429, 503) before anything starts when it cannot.
    held = services.streams.hold(http) if body.stream else None
    try:
        stream = services.engine.open(request, streaming=body.stream, arrival=arrival)
    except BaseException:
        services.streams.drop(held)  # nothing started: nothing to replay
        raise
    envelope = Envelope(reply.shape, services.model_name, reply.extra)
    # A stream's status is sent before it is known how it ends: a reply that does not end
    # complete is marked, so that an Idempotency-Key's retry runs it again, not replays it.
    on_end = [*reply.on_end, _marks_unfinished(http)]
    ending = Ending(services, request, reply.route, on_end, rec, stream.task)
    if body.stream:
        watched = http if held is None else None  # a kept stream is not its client's to stop
        if reply.writer is not None:
            frames = _written_stream(stream, reply.writer, watched, rec, ending)
        else:
            frames = _stream(stream, envelope, body.include_usage(), watched, rec, ending, reply)
        if held is not None:
            held.start(frames)
            return held.response(0)
        return _GuardedStream(
            frames,
            on_close=lambda: (stream.cancel(), ending()),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    if reply.writer is not None:
        return await _written(stream, reply.writer, http, rec, ending)
    watcher = asyncio.create_task(_watch_disconnect(http, stream))
    try:
        logprobs = [] if request.logprobs is not None else None
        async for event in stream:
            rec.add(event)
            if isinstance(event, TextDelta):
                if logprobs is not None and event.logprobs:
                    logprobs.extend(event.logprobs)
            elif isinstance(event, Finished):
                await ending.finish()
                whole = envelope.whole("".join(rec.parts), event, logprobs)
                whole["timings"].update(reply.timings)
                if reply.thinking is not None:
                    whole = with_reasoning(whole, reply.thinking)
                whole.update(reply.prelude)
                if reply.epilogue is not None:
                    whole.update(reply.epilogue("".join(rec.parts)))
                if reply.reshape is not None:
                    whole = reply.reshape(whole)
                return JSONResponse(whole)
            elif isinstance(event, Failed):
                await ending.finish()
                return error_response(event.message, event.status, code=event.code)
    finally:
        await _settle(ending, watcher)
    return error_response("generation ended without a result", 500)


def _watching(http: Request | None, stream: EngineStream) -> asyncio.Task | None:
    """A task that cancels the generation when its client goes away (None: no client to
    watch, a kept stream's)."""
    return asyncio.create_task(_watch_disconnect(http, stream)) if http is not None else None


async def _stream(
    stream: EngineStream,
    envelope: Envelope,
    include_usage: bool,
    http: Request | None,
    rec: TurnRecorder,
    ending: Ending,
    reply: Reply,
) -> AsyncIterator[str]:
    shape = envelope.shape
    watcher = _watching(http, stream)
    try:
        opening = shape.opening()
        if opening is not None:
            yield _sse(envelope.chunk(opening))
        if reply.prelude:
            yield _sse(envelope.chunk(None, **reply.prelude))
        offset = 0  # characters sent so far (the legacy logprobs shape wants text offsets)
        parts = ReplyParts(reply.thinking) if reply.thinking is not None else None
        async for event in stream:
            rec.add(event)
            if isinstance(event, TextDelta) and parts is not None:
                for choice in parts.feed(event.text, event.logprobs):
                    yield _sse(envelope.chunk(choice))
            elif isinstance(event, TextDelta):
                lp = shape.logprobs(event.logprobs, offset) if event.logprobs is not None else None
                yield _sse(envelope.chunk(shape.delta(event.text, lp)))
                offset += len(event.text)
            elif isinstance(event, Finished):
                for choice in parts.finish() if parts is not None else []:
                    yield _sse(envelope.chunk(choice))
                await ending.finish()
                timings = {**event.timings.as_dict(), **reply.timings}
                yield _sse(envelope.chunk(shape.closing(event.finish_reason), timings=timings))
                if reply.epilogue is not None:
                    yield _sse(envelope.chunk(None, **reply.epilogue("".join(rec.parts))))
                if include_usage:  # the last chunk: the timings too, as llama-server
                    yield _sse(envelope.chunk(None, usage=usage(event), timings=timings))
            elif isinstance(event, Failed):
                await ending.finish()
                yield _sse(error_body(event.message, event.status, code=event.code))
        yield _sse("[DONE]")
    finally:
        stream.cancel()  # no-op when finished; frees the slot when the client went away
        if watcher is not None:
            watcher.cancel()
        ending()  # the client went away or the server is shutting down: record what came


async def _written(
    stream: EngineStream, writer: EventWriter, http: Request, rec: TurnRecorder, ending: Ending
) -> JSONResponse:
    """The unstreamed reply through a writer of its own (see event_writer.py)."""
    watcher = asyncio.create_task(_watch_disconnect(http, stream))
    keeps = isinstance(writer, KeepsDeltas)
    try:
        async for event in stream:
            rec.add(event)
            if keeps and isinstance(event, TextDelta):
                writer.keep(event)  # type: ignore[attr-defined]
            elif isinstance(event, Finished):
                await ending.finish()
                return JSONResponse(writer.whole(event, "".join(rec.parts)))
            if isinstance(event, Failed):
                await ending.finish()
                return writer.error(event)
    finally:
        await _settle(ending, watcher)
    return error_response("generation ended without a result", 500)


async def _written_stream(
    stream: EngineStream,
    writer: EventWriter,
    http: Request | None,
    rec: TurnRecorder,
    ending: Ending,
) -> AsyncIterator[str]:
    """The reply through a writer of its own (see event_writer.py), streamed."""
    watcher = _watching(http, stream)
    try:
        for frame in writer.start():
            yield frame
        async for event in stream:
            rec.add(event)
            frames: Iterable[str] = ()
            if isinstance(event, TextDelta):
                frames = writer.text(event)
            elif isinstance(event, Finished):
                await ending.finish()
                frames = writer.end(event, "".join(rec.parts))
            elif isinstance(event, Failed):
                await ending.finish()
                frames = writer.fail(event)
            for frame in frames:
                yield frame
    finally:
        stream.cancel()  # no-op when finished; frees the slot when the client went away
        if watcher is not None:
            watcher.cancel()
        ending()
