"""Session turns across replicas: whose turn each session is in (a lease its request renews) and
how many turns it has had, so that two replicas never run turns of one session at once and a
retry never replaces what came after its first try.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29

Written by hand; constraint names follow app/db/models.py's naming convention.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_turns",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("holder", sa.String(128), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["conversations.id"],
            name="fk_session_turns_session_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name="pk_session_turns"),
    )


def downgrade() -> None:
    op.drop_table("session_turns")
