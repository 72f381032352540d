"""A collection says what a question that does not say puts before it: the best chunks
(`retrieval`) or every ready document (`full`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

Written by hand. A column with a server default: SQLite adds it in place, and every collection
from before this revision reads `retrieval`, what its questions did before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "collections",
        sa.Column("mode", sa.String(16), nullable=False, server_default="retrieval"),
    )


def downgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("mode")
