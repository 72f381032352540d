"""Tenants: API keys, the owner of each session, media owners and media used by messages.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Written by hand; constraint names follow app/db/models.py's naming convention. Sessions that
existed before belong to tenant "" (the open server's, and the static --api-key's).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(
            sa.Column("tenant_id", sa.String(64), nullable=False, server_default="")
        )
        batch.create_index("ix_conversations_tenant_id", ["tenant_id"])

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),  # sha256 hex of the key
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("revoked_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_table(
        "media_owners",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("media_id", sa.String(64), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "media_id", name="pk_media_owners"),
        sa.ForeignKeyConstraint(
            ["media_id"],
            ["media_assets.id"],
            name="fk_media_owners_media_id_media_assets",
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "message_media",
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("media_id", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("message_id", "media_id", name="pk_message_media"),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name="fk_message_media_message_id_messages",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["media_id"],
            ["media_assets.id"],
            name="fk_message_media_media_id_media_assets",
            ondelete="CASCADE",
        ),
    )
    # "Does anything else use this file?" looks media up by id.
    op.create_index("ix_message_media_media_id", "message_media", ["media_id"])


def downgrade() -> None:
    op.drop_index("ix_message_media_media_id", table_name="message_media")
    op.drop_table("message_media")
    op.drop_table("media_owners")
    op.drop_table("api_keys")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_index("ix_conversations_tenant_id")
        batch.drop_column("tenant_id")
