"""Issue 26: a collection may say how its questions reuse chunk KV (`kv_reuse`: prefix | blend).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

Written by hand. A plain nullable column: SQLite adds it in place; existing collections keep
NULL, which means the server's --kv-reuse, as before this revision.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("collections", sa.Column("kv_reuse", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("kv_reuse")
