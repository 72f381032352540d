"""Tool calling (issue 29): assistant messages keep their tool calls, tool messages the call
they answer, and a message may have the role "tool".

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

Written by hand; constraint names follow app/db/models.py's naming convention. SQLite changes a
CHECK constraint by recreating the table (batch mode), which keeps AUTOINCREMENT when told.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _roles(roles: str) -> None:
    with op.batch_alter_table("messages", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_constraint(op.f("ck_messages_role"), type_="check")
        batch.create_check_constraint(op.f("ck_messages_role"), f"role IN ({roles})")


def upgrade() -> None:
    with op.batch_alter_table("messages", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("tool_calls", sa.JSON(none_as_null=True), nullable=True))
        batch.add_column(sa.Column("tool_call_id", sa.String(64), nullable=True))
    _roles("'system', 'user', 'assistant', 'tool'")


def downgrade() -> None:
    op.execute("DELETE FROM messages WHERE role = 'tool'")
    _roles("'system', 'user', 'assistant'")
    with op.batch_alter_table("messages", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("tool_call_id")
        batch.drop_column("tool_calls")
