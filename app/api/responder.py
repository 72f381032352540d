"""Turns an engine stream into an HTTP response: SSE when streaming, one JSON object otherwise.

A client that goes away cancels its task: the slot is freed at once and keeps its KV for reuse.
Every request that ran ends in exactly one call of the end hooks (metrics, the request log line
and, for sessions, storing the reply), also when the client went away or the server shut down.
The hooks run before the last chunk is sent, so a client that saw the end finds it recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from app.api.errors import error_body, error_response
from app.api.event_writer import EventWriter, KeepsDeltas
from app.api.outcome import RequestOutcome
from app.api.reply_parts import ReplyParts, with_reasoning
from app.api.responses import Envelope, Shape, usage
from app.api.schemas import GenerationFields
from app.api.services import Services
from app.chat.reasoning import Thinking
from app.chat.turn import TurnRecorder, TurnResult
from app.engine.events import Failed, Finished, TextDelta
from app.engine.request import GenerationRequest
from app.engine.stream import EngineStream
from app.engine.task import Task

log = logging.getLogger(__name__)

EndHook = Callable[[TurnResult], None]


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
    # A chat reply's reasoning split (app/chat/reasoning.py); None: the text as it comes.
    thinking: Thinking | None = None


def _sse(obj: dict[str, Any] | str) -> str:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return f"data: {data}\n\n"


async def _watch_disconnect(http: Request, stream: EngineStream) -> None:
    while not await http.is_disconnected():
        await asyncio.sleep(0.25)
    stream.cancel()


class _Ending:
    """Runs the end hooks once; a failing hook is logged and never breaks the response.

    On the normal paths the hooks (which may write to the database) run in a worker thread so
    the event loop keeps serving; on a cancellation path they run inline, as there is nothing
    left to await."""

    def __init__(
        self,
        services: Services,
        request: GenerationRequest,
        reply: Reply,
        rec: TurnRecorder,
        task: Task,
    ) -> None:
        self.services, self.request, self.reply, self.rec = services, request, reply, rec
        # A request whose client went away ends without a Finished event reaching us: its slot
        # and token counts are read from the task (ints the engine thread wrote).
        self.task = task
        self.done = False
        services.inflight.add(self)

    async def finish(self) -> None:
        if not self.done:
            self.done = True  # before the await: a cancellation there must not run them twice
            await asyncio.to_thread(self._run, self.rec.result())

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            self._run(self.rec.result())

    def _run(self, result: TurnResult) -> None:
        try:
            for hook in [self._observe, *self.reply.on_end]:
                try:
                    hook(result)
                except Exception:
                    log.exception("end-of-request hook failed")
        finally:
            self.services.inflight.discard(self)

    def _observe(self, result: TurnResult) -> None:
        done, failed, task = result.finished, result.failed, self.task
        timings = done.timings if done is not None else None
        self.services.metrics.observe(
            RequestOutcome(
                route=self.reply.route,
                outcome=result.status,
                status=failed.status if failed is not None else 200,
                slot=timings.slot if timings is not None else task.slot_id,
                session_id=self.request.session,
                prompt_tokens=len(self.request.prompt),
                cached_tokens=done.cached_tokens if done is not None else task.n_cached,
                cache_source=timings.cache_source if timings is not None else task.cache_source,
                completion_tokens=(
                    done.completion_tokens if done is not None else task.n_generated
                ),
                ttft_s=result.ttft_s,
                e2e_s=result.e2e_s,
                finish_reason=done.finish_reason if done is not None else None,
                draft_tokens=task.draft_n,
                draft_tokens_accepted=task.draft_n_accepted,
                prompt_ms=timings.prompt_ms if timings is not None else 0.0,
                predicted_ms=timings.predicted_ms if timings is not None else 0.0,
            )
        )


async def _settle(ending: _Ending, watcher: asyncio.Task) -> None:
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
    # Its arrival ticket (app/api/arrival_tickets.py) is settled as the task is queued.
    arrival = getattr(http.state, "arrival", None)
    stream = services.engine.open(request, streaming=body.stream, arrival=arrival)
    envelope = Envelope(reply.shape, services.model_name, reply.extra)
    ending = _Ending(services, request, reply, rec, stream.task)
    if reply.writer is not None:
        return await _written(stream, reply.writer, body.stream, http, rec, ending)
    if body.stream:
        return _GuardedStream(
            _stream(stream, envelope, body.include_usage(), http, rec, ending, reply),
            on_close=lambda: (stream.cancel(), ending()),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
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
                if reply.reshape is not None:
                    whole = reply.reshape(whole)
                return JSONResponse(whole)
            elif isinstance(event, Failed):
                await ending.finish()
                return error_response(event.message, event.status, code=event.code)
    finally:
        await _settle(ending, watcher)
    return error_response("generation ended without a result", 500)


async def _stream(
    stream: EngineStream,
    envelope: Envelope,
    include_usage: bool,
    http: Request,
    rec: TurnRecorder,
    ending: _Ending,
    reply: Reply,
) -> AsyncIterator[str]:
    shape = envelope.shape
    watcher = asyncio.create_task(_watch_disconnect(http, stream))
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
                yield _sse(
                    envelope.chunk(
                        shape.closing(event.finish_reason),
                        timings={**event.timings.as_dict(), **reply.timings},
                    )
                )
                if include_usage:
                    yield _sse(envelope.chunk(None, usage=usage(event)))
            elif isinstance(event, Failed):
                await ending.finish()
                yield _sse(error_body(event.message, event.status, code=event.code))
        yield _sse("[DONE]")
    finally:
        stream.cancel()  # no-op when finished; frees the slot when the client went away
        watcher.cancel()
        ending()  # the client went away or the server is shutting down: record what came


async def _written(
    stream: EngineStream,
    writer: EventWriter,
    streaming: bool,
    http: Request,
    rec: TurnRecorder,
    ending: _Ending,
) -> JSONResponse | StreamingResponse:
    """The reply through a writer of its own (see event_writer.py), streamed or whole."""
    if streaming:
        return _GuardedStream(
            _written_stream(stream, writer, http, rec, ending),
            on_close=lambda: (stream.cancel(), ending()),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
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
    stream: EngineStream, writer: EventWriter, http: Request, rec: TurnRecorder, ending: _Ending
) -> AsyncIterator[str]:
    watcher = asyncio.create_task(_watch_disconnect(http, stream))
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
        watcher.cancel()
        ending()
