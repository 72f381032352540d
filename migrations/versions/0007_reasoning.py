"""Reasoning (issue 30): an assistant message keeps its `<think>` block apart from its content.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

Written by hand. A plain nullable column: SQLite adds it in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("reasoning", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("reasoning")
