"""Plain results of the Store: no ORM objects leave app/db, so callers never touch a detached
instance, a lazy load or a session from another thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.db.models import Conversation, MediaAsset, Message


@dataclass(slots=True)
class MessageRecord:
    id: int
    session_id: str
    seq: int  # 0-based position in the conversation
    role: str  # "system" | "user" | "assistant"
    content: str | list[dict[str, Any]]  # text, or OpenAI content parts
    token_ids: list[int] | None
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    timings: dict[str, Any] | None
    finish_reason: str | None
    status: str  # "complete" | "cancelled" | "error"
    error: str | None
    created_at: datetime  # timezone-aware, UTC


@dataclass(slots=True)
class SessionRecord:
    id: str
    title: str | None
    system_prompt: str | None
    sampling: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    n_messages: int
    # Filled only by Store.get_session(with_messages=True), ordered by seq.
    messages: list[MessageRecord] = field(default_factory=list)


@dataclass(slots=True)
class MediaRecord:
    id: str  # "media-" + first 24 hex digits of sha256
    sha256: str
    mime_type: str
    size: int  # bytes
    location: str
    created_at: datetime


def message_record(m: Message) -> MessageRecord:
    return MessageRecord(
        id=m.id,
        session_id=m.session_id,
        seq=m.seq,
        role=m.role,
        content=m.content,
        token_ids=m.token_ids,
        prompt_tokens=m.prompt_tokens,
        cached_tokens=m.cached_tokens,
        completion_tokens=m.completion_tokens,
        timings=m.timings,
        finish_reason=m.finish_reason,
        status=m.status,
        error=m.error,
        created_at=m.created_at,
    )


def session_record(
    c: Conversation, n_messages: int, messages: list[MessageRecord] | None = None
) -> SessionRecord:
    return SessionRecord(
        id=c.id,
        title=c.title,
        system_prompt=c.system_prompt,
        sampling=c.sampling,
        created_at=c.created_at,
        updated_at=c.updated_at,
        n_messages=n_messages,
        messages=messages if messages is not None else [],
    )


def media_record(a: MediaAsset) -> MediaRecord:
    return MediaRecord(
        id=a.id,
        sha256=a.sha256,
        mime_type=a.mime_type,
        size=a.size,
        location=a.location,
        created_at=a.created_at,
    )
