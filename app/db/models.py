"""SQLAlchemy 2.0 ORM models: the declarative `Base` with its column types, and the tables of
conversations (sessions), their messages, stored media and API keys.

The documents' tables (app/db/documents/document_models.py) are declared on the same `Base`, so one
metadata holds every table. The schema itself is created by Alembic (migrations/versions/);
these classes must describe the same tables, which tests/app/db/test_migrations.py checks with
alembic's compare_metadata.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ROLES = ("system", "user", "assistant", "tool")
STATUSES = ("complete", "cancelled", "error")

# Fixed constraint names: migrations refer to them by name, and SQLite's batch mode (which
# recreates tables to alter them) needs every constraint named to find it again.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Plain JSON on both backends, not JSONB: nothing queries inside these values, and json (unlike
# jsonb) keeps a document exactly as written (key order, "\u0000" in strings). none_as_null
# stores Python None as SQL NULL rather than the JSON literal null.
Json = JSON(none_as_null=True)


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    PostgreSQL has timestamptz; SQLite stores text without an offset, so values are normalised
    to UTC before storing and get tzinfo=UTC back when read.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: store timezone-aware UTC datetimes only")
        value = value.astimezone(UTC)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Conversation(Base):
    """A chat session. The API calls it a session; the table name avoids clashing with
    SQLAlchemy's own `Session` in code that reads both."""

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # uuid4().hex
    # The tenant that owns it (its API key's); "" on a server without keys.
    tenant_id: Mapped[str] = mapped_column(String(64), default="", server_default="", index=True)
    title: Mapped[str | None] = mapped_column(Text)
    system_prompt: Mapped[str | None] = mapped_column(Text)
    sampling: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    # The name of the model whose server made it, or the one it was moved to (PATCH): router
    # mode sends its requests that name no model there. None: made before sessions had one.
    model: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Indexed: list_sessions orders by it (newest activity first).
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class Message(Base):
    __tablename__ = "messages"
    # (session_id, seq) is unique, and its index (session_id first) also serves lookups and
    # the ON DELETE CASCADE by session_id, so session_id needs no index of its own.
    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        CheckConstraint(f"role IN {ROLES!r}", name="role"),
        CheckConstraint(f"status IN {STATUSES!r}", name="status"),
        # SQLite: AUTOINCREMENT never hands out the id of a deleted row again, like a
        # PostgreSQL sequence (plain rowid reuses the largest id once it is deleted).
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("conversations.id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(Integer)  # 0-based position in the conversation
    role: Mapped[str] = mapped_column(String(16))
    # A string, or a list of OpenAI content parts ({"type": "text", ...}, image_url, ...).
    content: Mapped[str | list[dict[str, Any]]] = mapped_column(Json)
    # Tool calling: an assistant message's calls, [{"id", "name", "arguments"}] with
    # the arguments as the model wrote them (its content is the text before them); a tool
    # message's answer names the call it answers.
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(Json)
    tool_call_id: Mapped[str | None] = mapped_column(String(64))
    # An assistant message's thought (the reply's <think> block), apart from its content.
    reasoning: Mapped[str | None] = mapped_column(Text)
    # A full-document-mode reply's citations: the chunks its answer quoted or named, found from
    # its text when it ended (a retrieval turn's sources are its user message's content).
    citations: Mapped[list[dict[str, Any]] | None] = mapped_column(Json)
    # Assistant messages: the exact generated token ids, so a later turn can rebuild the prompt
    # token for token (re-tokenising the text may give other ids and miss the KV cache).
    token_ids: Mapped[list[int] | None] = mapped_column(Json)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    timings: Mapped[dict[str, Any] | None] = mapped_column(Json)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MediaAsset(Base):
    """A stored image (or other media) file of a tenant, deduplicated by content hash within
    the tenant.

    id is `media_id(sha256, tenant)`: the same bytes always get the same id for one tenant, on
    every server, so an id in an old message still names the right file; another tenant's
    upload of the same bytes is a row of its own. Rows from before migration 0010 have
    `legacy_media_id(sha256)` and are shared by the tenants that uploaded or use them.
    """

    __tablename__ = "media_assets"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    mime_type: Mapped[str] = mapped_column(String(255))
    size: Mapped[int] = mapped_column(BigInteger)  # bytes
    # The file's path under a server's media directory: where uploads from before migration
    # 0004 live until a server that has the file copies it into media_bytes.
    location: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MediaBytes(Base):
    """The bytes of a media file, in the database so that every replica can read them (a
    table of its own: reading a media row never loads the image)."""

    __tablename__ = "media_bytes"

    media_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("media_assets.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[bytes] = mapped_column(LargeBinary)


class MediaOwner(Base):
    """A tenant's upload of a media file (POST /v1/media): the file is visible to the tenants
    that uploaded it or whose messages use it, and kept while any of them does."""

    __tablename__ = "media_owners"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    media_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("media_assets.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MessageMedia(Base):
    """A message's use of a media file: media are reference-counted from messages, so deleting
    a session frees the files nothing else uses."""

    __tablename__ = "message_media"

    message_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    media_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("media_assets.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class ApiKey(Base):
    """An API key of a tenant; only the sha256 of the key is stored, never the key."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # "key-" + 12 hex digits
    name: Mapped[str] = mapped_column(String(200))
    tenant_id: Mapped[str] = mapped_column(String(64))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


def media_id(sha256: str, tenant_id: str) -> str:
    """The tenant's id for a file: a hash of the tenant and the file's sha256. Two tenants'
    ids for the same bytes differ, so a tenant's own id tells it nothing of another's upload;
    an id is a name, not a permission (every use checks the tenant: app/db/media_rows.py)."""
    key = f"media\x00{tenant_id}\x00{sha256}".encode()
    return "media-" + hashlib.blake2b(key, digest_size=12).hexdigest()


def legacy_media_id(sha256: str) -> str:
    """The id of a row from before migration 0010: the same for every tenant."""
    return "media-" + sha256[:24]
