"""Documents (issue 11): collections, documents, chunks and their prompt token ids.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

Written by hand, constraint names as app/db/models.py's naming convention makes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "collections",
        sa.Column("id", sa.String(64), nullable=False),  # "col-" + 24 hex
        sa.Column("tenant_id", sa.String(128), server_default="", nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("chunk_tokens", sa.Integer(), nullable=False),
        sa.Column("overlap_tokens", sa.Integer(), nullable=False),
        sa.Column("system_prompt", sa.Text(), nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_collections"),
    )
    op.create_index("ix_collections_tenant_id", "collections", ["tenant_id"])

    op.create_table(
        "documents",
        sa.Column("id", sa.String(64), nullable=False),  # "doc-" + 24 hex
        sa.Column("collection_id", sa.String(64), nullable=False),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),  # extracted text, ingestion's input
        sa.Column("page_starts", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("chunks_done", sa.Integer(), nullable=False),
        sa.Column("chunks_total", sa.Integer(), nullable=False),
        sa.Column("n_tokens", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_documents"),
        sa.ForeignKeyConstraint(
            ["collection_id"],
            ["collections.id"],
            name="fk_documents_collection_id_collections",
            ondelete="CASCADE",
        ),
        # Also the index for "documents of a collection" and for the cascade.
        sa.UniqueConstraint("collection_id", "sha256", name="uq_documents_collection_id_sha256"),
        sa.CheckConstraint(
            "status IN ('queued', 'processing', 'ready', 'error')",
            name=op.f("ck_documents_status"),
        ),
    )

    op.create_table(
        "chunks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("document_id", sa.String(64), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),  # [n] in prompts
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("char_start", sa.Integer(), nullable=False),
        sa.Column("char_end", sa.Integer(), nullable=False),
        sa.Column("page", sa.Integer(), nullable=True),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),  # float32 vector
        sa.PrimaryKeyConstraint("id", name="pk_chunks"),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["documents.id"],
            name="fk_chunks_document_id_documents",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("document_id", "ordinal", name="uq_chunks_document_id_ordinal"),
        sqlite_autoincrement=True,  # a deleted chunk's id (a FAISS id) is never reused
    )

    op.create_table(
        "chunk_tokens",
        sa.Column("chunk_id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),  # chat model fingerprint
        sa.Column("token_ids", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("chunk_id", "model", name="pk_chunk_tokens"),
        sa.ForeignKeyConstraint(
            ["chunk_id"], ["chunks.id"], name="fk_chunk_tokens_chunk_id_chunks", ondelete="CASCADE"
        ),
    )


def downgrade() -> None:
    op.drop_table("chunk_tokens")
    op.drop_table("chunks")
    op.drop_table("documents")
    op.drop_index("ix_collections_tenant_id", table_name="collections")
    op.drop_table("collections")
