"""A reply in full-document mode keeps its citations: the chunks its answer quoted, found from
its text when it ended (a retrieval turn's sources are in its user message's content).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

Written by hand. A plain nullable column: SQLite adds it in place, and every message from
before this revision reads null (its citations, if any, are its question's sources).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("citations", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("citations")
