"""Initial schema: conversations (chat sessions), their messages, stored media.

Revision ID: 0001
Revises:
Create Date: 2025-11-22

Written by hand. Constraint names follow app/db/models.py's naming convention, so later
migrations (and SQLite batch mode) can refer to them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Timezone-aware everywhere (timestamptz on PostgreSQL); the ORM stores UTC.
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(64), nullable=False),  # uuid4 hex
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("system_prompt", sa.Text(), nullable=True),
        sa.Column("sampling", sa.JSON(), nullable=False),  # request defaults, {} if none
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    # Listing sessions orders by latest activity.
    op.create_index("ix_conversations_updated_at", "conversations", ["updated_at"])

    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),  # 0-based position in the session
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),  # string or list of content parts
        sa.Column("token_ids", sa.JSON(), nullable=True),  # exact generated ids (assistant)
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("cached_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("timings", sa.JSON(), nullable=True),
        sa.Column("finish_reason", sa.String(32), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["conversations.id"],
            name="fk_messages_session_id_conversations",
            ondelete="CASCADE",
        ),
        # Also the index for "messages of a session" and for the cascade.
        sa.UniqueConstraint("session_id", "seq", name="uq_messages_session_id_seq"),
        sa.CheckConstraint(
            "role IN ('system', 'user', 'assistant')", name=op.f("ck_messages_role")
        ),
        sa.CheckConstraint(
            "status IN ('complete', 'cancelled', 'error')", name=op.f("ck_messages_status")
        ),
        sqlite_autoincrement=True,  # ids of deleted messages are never reused
    )

    op.create_table(
        "media_assets",
        sa.Column("id", sa.String(64), nullable=False),  # "media-" + sha256[:24]
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("mime_type", sa.String(255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),  # bytes
        sa.Column("location", sa.Text(), nullable=False),  # storage path
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_media_assets"),
        sa.UniqueConstraint("sha256", name="uq_media_assets_sha256"),
    )


def downgrade() -> None:
    op.drop_table("media_assets")
    op.drop_table("messages")
    op.drop_index("ix_conversations_updated_at", table_name="conversations")
    op.drop_table("conversations")
