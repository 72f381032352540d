"""Issue 31: a collection records the embedding backend that made its vectors; vectors of
another backend are not mixed into it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

Collections that already hold chunks were embedded by torch fp32 (the only backend before this
revision); empty ones take the backend of their first ingested document.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.add_column(sa.Column("embedding_backend", sa.String(32), nullable=True))
    op.execute(
        "UPDATE collections SET embedding_backend = 'torch' WHERE id IN ("
        "SELECT documents.collection_id FROM documents "
        "JOIN chunks ON chunks.document_id = documents.id)"
    )


def downgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("embedding_backend")
