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
    role: str  # "system" | "user" | "assistant" | "tool"
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
    tool_calls: list[dict[str, Any]] | None = None  # an assistant's: {"id", "name", "arguments"}
    tool_call_id: str | None = None  # a tool message's: the call it answers
    reasoning: str | None = None  # an assistant's thought (<think>), kept apart from content
    citations: list[dict[str, Any]] | None = None  # a full-mode reply's, found from its text


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
    model: str | None = None  # the name of the model whose server made it; None: not known


@dataclass(slots=True)
class MediaRecord:
    id: str  # "media-" + first 24 hex digits of sha256
    sha256: str
    mime_type: str
    size: int  # bytes
    location: str
    created_at: datetime


# A message's own columns (not its id or session): what a record shows and a fork copies.
MESSAGE_FIELDS = (
    "seq",
    "role",
    "content",
    "token_ids",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "timings",
    "finish_reason",
    "status",
    "error",
    "created_at",
    "tool_calls",
    "tool_call_id",
    "reasoning",
    "citations",
)


def message_values(m: Message) -> dict:
    return {name: getattr(m, name) for name in MESSAGE_FIELDS}


def message_record(m: Message) -> MessageRecord:
    return MessageRecord(id=m.id, session_id=m.session_id, **message_values(m))


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
        model=c.model,
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
