"""Replicas (issue 28): media bytes in the database, ingestion claims with leases, a version per
collection for the replicas' search indexes, and a log of deleted documents.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

Written by hand; constraint names follow app/db/models.py's naming convention. Media rows from
before this revision have no bytes here yet: a server that has their file copies it in at start
(app/media/media_store.py `import_files`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "media_bytes",
        sa.Column("media_id", sa.String(64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("media_id", name="pk_media_bytes"),
        sa.ForeignKeyConstraint(
            ["media_id"],
            ["media_assets.id"],
            name="fk_media_bytes_media_id_media_assets",
            ondelete="CASCADE",
        ),
    )
    with op.batch_alter_table("collections") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(128), nullable=True))
        batch.add_column(sa.Column("lease_until", Timestamp, nullable=True))
    op.create_table(
        "document_deletions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("document_id", sa.String(64), nullable=False),
        sa.Column("deleted_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_document_deletions"),
        sqlite_autoincrement=True,  # ids only grow: readers keep a cursor
    )


def downgrade() -> None:
    op.drop_table("document_deletions")
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("lease_until")
        batch.drop_column("claimed_by")
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("version")
    op.drop_table("media_bytes")
