"""Media belong to their tenant: a media row per tenant and bytes, its id derived from both
(app/db/models.py `media_id`), so the same image uploaded by two tenants is two rows and
nothing of one tells the other it exists. The sha256 is no longer unique.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

Written by hand; constraint names follow app/db/models.py's naming convention. Rows from before
this revision keep their ids (the sha256's first 24 hex digits), which old messages name, and
their old visibility (the tenants that uploaded them or whose messages use them). A downgrade
fails while two rows share a sha256.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("media_assets") as batch:
        batch.drop_constraint("uq_media_assets_sha256", type_="unique")


def downgrade() -> None:
    with op.batch_alter_table("media_assets") as batch:
        batch.create_unique_constraint("uq_media_assets_sha256", ["sha256"])
