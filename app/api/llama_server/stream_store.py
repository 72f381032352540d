"""`StreamStore`: the resumable streams this server keeps, each under its tenant and the
`X-Conversation-Id` its request carried (llama-server's stream session manager).

One conversation has at most one stream: a newer streamed request of the same conversation
stops the older one's generation and takes its place, as llama-server's. What it keeps is
bounded, since every request may be hostile:

- a stream holds at most `max_bytes` (--stream-max-bytes), its oldest bytes dropped first;
- a finished stream is kept `ttl` seconds (--stream-ttl), then dropped at the next request
  that touches streams;
- a tenant keeps at most `per_tenant` streams (--streams-per-tenant) and the server `total`
  (--streams-max): a new one takes the place of the oldest finished one, and when every one
  is still running the request is refused (429 for the tenant's own, 503 for the server's),
  before any generation starts. 0 streams per tenant turns resumable streams off.

Streams are looked up by (tenant, conversation id): a caller never reads, stops or learns of
another tenant's stream, whatever id it guesses (an unknown one and another tenant's answer
alike).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

from app.api.llama_server.stream_buffer import StreamBuffer
from app.api.middleware.auth import tenant_of
from app.engine.request import RequestError

HEADER = "X-Conversation-Id"
# Longer than any conversation id a client makes (llama-server's web UI: a UUID, then `::` and
# the model's name); a bound, so an id is never a way to make the server keep much.
MAX_ID_CHARS = 512
MAX_LOOKUP_IDS = 256  # ids one POST /v1/streams/lookup may ask about


def _utf8(value: str) -> str:
    """A header's value as the same id in the query string reads: headers arrive as Latin-1,
    `conv_id=` is percent-decoded UTF-8 (llama-server compares the bytes)."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


@dataclass(slots=True)
class StreamLimits:
    per_tenant: int  # streams one tenant keeps (0: resumable streams off)
    total: int  # streams the server keeps
    max_bytes: int  # bytes one stream keeps
    ttl: float  # seconds a finished stream is kept


class StreamStore:
    def __init__(self, limits: StreamLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._streams: dict[tuple[str, str], StreamBuffer] = {}

    def hold(self, http: Request) -> StreamBuffer | None:
        """The stream a streamed request writes into, when it names its conversation; raises
        RequestError (nothing kept, nothing started) when it cannot be kept."""
        conv_id = _utf8(http.headers.get(HEADER, ""))
        if not conv_id or self.limits.per_tenant <= 0:
            return None
        if len(conv_id) > MAX_ID_CHARS:
            raise RequestError(f"{HEADER} is longer than {MAX_ID_CHARS} characters", param=HEADER)
        return self.open(tenant_of(http), conv_id)

    def open(self, tenant: str, conv_id: str) -> StreamBuffer:
        self._expire()
        older = self._streams.pop((tenant, conv_id), None)
        if older is not None:
            older.stop()  # one conversation, one live stream
        self._make_room(tenant)
        stream = StreamBuffer(tenant, conv_id, self.limits.max_bytes, self._clock)
        self._streams[(tenant, conv_id)] = stream
        return stream

    def _make_room(self, tenant: str) -> None:
        mine = [s for s in self._streams.values() if s.tenant == tenant]
        if len(mine) >= self.limits.per_tenant and not self._evict_oldest_done(mine):
            raise RequestError(
                f"this tenant already has {len(mine)} resumable streams running "
                "(--streams-per-tenant); stop one (DELETE /v1/stream?conv_id=...) or wait "
                "for one to end",
                param=HEADER,
                code="too_many_streams",
                status=429,
                headers={"Retry-After": "1"},
            )
        everyone = list(self._streams.values())
        if len(everyone) >= self.limits.total and not self._evict_oldest_done(everyone):
            raise RequestError(
                f"the server already keeps {len(everyone)} resumable streams, all running "
                "(--streams-max); try again",
                param=HEADER,
                code="unavailable",
                status=503,
                headers={"Retry-After": "1"},
            )

    def _evict_oldest_done(self, candidates: list[StreamBuffer]) -> bool:
        done = [s for s in candidates if s.done_at is not None]
        if not done:
            return False
        oldest = min(done, key=lambda s: s.done_at or 0.0)
        del self._streams[(oldest.tenant, oldest.conv_id)]
        return True

    def _expire(self) -> None:
        cutoff = self._clock() - self.limits.ttl
        for key, stream in list(self._streams.items()):
            if stream.done_at is not None and stream.done_at <= cutoff:
                del self._streams[key]

    def get(self, tenant: str, conv_id: str) -> StreamBuffer | None:
        self._expire()
        return self._streams.get((tenant, conv_id))

    def stop(self, tenant: str, conv_id: str) -> None:
        """Stop the stream's generation and forget it; nothing when there is none."""
        stream = self._streams.pop((tenant, conv_id), None)
        if stream is not None:
            stream.stop()

    def drop(self, stream: StreamBuffer | None) -> None:
        """Forget a stream whose request failed before it started (nothing to replay)."""
        if stream is None:
            return
        if self._streams.get((stream.tenant, stream.conv_id)) is stream:
            del self._streams[(stream.tenant, stream.conv_id)]
        stream.stop()

    def lookup(self, tenant: str, conv_ids: list[str]) -> list[StreamBuffer]:
        """The tenant's streams of these conversations: each id names its own stream and those
        of `<id>::<model>` (llama-server's web UI keeps one per model of a conversation)."""
        self._expire()
        found: dict[tuple[str, str], StreamBuffer] = {}
        for conv_id in conv_ids:
            for key, stream in self._streams.items():
                if key[0] == tenant and (key[1] == conv_id or key[1].startswith(conv_id + "::")):
                    found.setdefault(key, stream)
        return list(found.values())

    def close(self) -> None:
        """The server is stopping: every generation stops, every reader is woken."""
        for stream in self._streams.values():
            stream.stop()
        self._streams.clear()
