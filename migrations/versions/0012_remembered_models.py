"""Sessions and collections remember their model: the name of the model whose server made them
(router mode sends a request that names no model to it).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30

Written by hand. Plain nullable columns: SQLite adds them in place; rows from before this
revision keep NULL, which means no model of their own (a request goes where it names, else to
the router's default; a single server serves them as before).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("model", sa.Text(), nullable=True))
    op.add_column("collections", sa.Column("model", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("model")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("model")
