"""Documents read by OCR: the upload's bytes while pages wait for OCR, and which pages were
read or failed.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28

Written by hand. Plain nullable columns (and a counter defaulting to 0): SQLite adds them in
place; documents from before this revision needed no OCR (a scanned PDF was refused), which
NULL says.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("source", sa.LargeBinary(), nullable=True))
    op.add_column("documents", sa.Column("ocr", sa.JSON(), nullable=True))
    op.add_column(
        "documents", sa.Column("ocr_done", sa.Integer(), nullable=False, server_default="0")
    )


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("ocr_done")
        batch.drop_column("ocr")
        batch.drop_column("source")
