"""Idempotent writes: the `Idempotency-Key`s of writes with the response to replay, and each
replica's progress through the deletion log (rows every replica has applied are pruned).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

Written by hand; constraint names follow app/db/models.py's naming convention.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("route", sa.String(512), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("body_sha256", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("holder", sa.String(128), nullable=True),
        sa.Column("lease_until", Timestamp, nullable=True),
        sa.Column("stored", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("content_type", sa.String(255), nullable=True),
        sa.Column("response", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_idempotency_keys"),
        sa.UniqueConstraint(
            "tenant_id", "route", "key", name="uq_idempotency_keys_tenant_id_route_key"
        ),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"])
    op.create_table(
        "replica_progress",
        sa.Column("replica", sa.String(128), nullable=False),
        sa.Column("deletion_cursor", sa.Integer(), nullable=False),
        sa.Column("seen_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("replica", name="pk_replica_progress"),
    )


def downgrade() -> None:
    op.drop_table("replica_progress")
    op.drop_index("ix_idempotency_keys_created_at", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
