"""`StreamBuffer`: one resumable stream's bytes (llama-server's stream session), kept while its
generation runs whoever reads it, so a client that lost its connection reads it again.

A streamed request sent with `X-Conversation-Id` runs its generation in a producer task of its
own (`start`), which writes every SSE frame here; the request's own response is a reader from
byte 0, and `GET /v1/stream?conv_id=..&from=N` another one from byte N. A reader that goes away
stops reading, never the generation: only `stop` (`DELETE /v1/stream`, a newer stream of the
same conversation, the server's end) cancels the producer.

Invariants: the buffer holds at most `max_bytes` (the oldest bytes are dropped first, counted in
`dropped`, so an offset always names the same byte); `done` is set once and wakes every reader;
a stream whose producer fails for any reason ends with an error event, never silently.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable

from fastapi.responses import StreamingResponse

log = logging.getLogger(__name__)

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def error_event(message: str, status: int, code: str) -> bytes:
    """An error as a stream's last event: OpenAI's error object in a `data:` frame."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    error = {"message": message, "type": kind, "param": None, "code": code}
    return f"data: {json.dumps({'error': error})}\n\n".encode()


class OffsetLost(Exception):
    """A read from before the bytes the buffer still holds."""

    def __init__(self, dropped: int) -> None:
        super().__init__(f"the stream's first {dropped} bytes are no longer kept")
        self.dropped = dropped


class StreamBuffer:
    def __init__(
        self,
        tenant: str,
        conv_id: str,
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tenant = tenant
        self.conv_id = conv_id
        self.max_bytes = max_bytes
        self.data = bytearray()
        self.dropped = 0  # bytes dropped from the front to stay within max_bytes
        self.started_at = int(time.time())  # Unix seconds, as llama-server's lookup says
        self.completed_at = 0  # Unix seconds once done; 0 while running (llama-server's)
        self._clock = clock
        self.done_at: float | None = None  # `clock`'s time when done (the TTL counts from it)
        # Kept, but its generation has not started yet (a model still loading): readers are
        # told to come back (503) rather than that it does not exist.
        self.pending = True
        self.producer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # replaced at every change; readers wait on the old one

    @property
    def done(self) -> bool:
        return self.done_at is not None

    @property
    def total(self) -> int:
        """Bytes that ever entered the stream (the next byte's offset)."""
        return self.dropped + len(self.data)

    def append(self, chunk: bytes) -> None:
        if self.done or not chunk:
            return
        self.data += chunk
        over = len(self.data) - self.max_bytes
        if over > 0:
            del self.data[:over]
            self.dropped += over
        self._changed()

    def finish(self) -> None:
        if self.done:
            return
        self.done_at = self._clock()
        self.completed_at = int(time.time())
        self.pending = False
        self._changed()

    def _changed(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    async def read(self, offset: int) -> AsyncIterator[bytes]:
        """The bytes from `offset` on as they come, until the stream is done; OffsetLost when
        `offset` (or a slow reader's place) falls before the bytes still kept."""
        while True:
            if offset < self.dropped:
                raise OffsetLost(self.dropped)
            if offset < self.total:
                chunk = bytes(self.data[offset - self.dropped :])
                offset += len(chunk)
                yield chunk
                continue
            if self.done:
                return
            await self._wake.wait()

    def start(self, frames: AsyncIterator[str]) -> None:
        """Run the generation's frames into the buffer in a task of their own."""
        self.pending = False
        self.producer = asyncio.create_task(self._produce(frames))

    async def _produce(self, frames: AsyncIterator[str]) -> None:
        try:
            async for frame in frames:
                self.append(frame.encode())
        except asyncio.CancelledError:
            raise  # stopped: `stop` finishes the buffer
        except Exception:
            log.exception("resumable stream %r failed", self.conv_id)
            message = "internal error while streaming; the reply is incomplete"
            self.append(error_event(message, 500, "internal_error"))
        finally:
            self.finish()

    def stop(self) -> None:
        """Cancel the generation (its slot is freed) and wake every reader."""
        if self.producer is not None and not self.producer.done():
            self.producer.cancel()
        self.finish()

    def response(self, offset: int) -> StreamingResponse:
        """A reader from `offset` as an SSE response (the caller checked `offset`)."""
        return StreamingResponse(
            self._served(offset), media_type="text/event-stream", headers=SSE_HEADERS
        )

    async def _served(self, offset: int) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.read(offset):
                yield chunk
        except OffsetLost as e:
            # This reader fell behind by more than the buffer holds: say so instead of ending
            # as if the stream were over.
            message = (
                f"this reader fell behind: the stream's first {e.dropped} bytes are no longer "
                "kept (--stream-max-bytes); read it again from a later offset"
            )
            yield error_event(message, 400, "stream_offset_lost")
