from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

import app.db.documents.document_models  # noqa: F401 (its tables join Base.metadata)
import app.db.replicas.replica_models  # noqa: F401 (its tables join Base.metadata)
from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_store import DocumentStore
from app.db.migrate import alembic_config, current, head, upgrade
from app.db.models import Base
from app.db.sql_engine import make_engine
from app.db.store import Store

ROOT = Path(__file__).resolve().parents[3]
# This checkout's `app`, also where the venv's editable install points at another one.
THIS_CHECKOUT = {**os.environ, "PYTHONPATH": str(ROOT)}
TABLES = {
    "conversations",
    "messages",
    "media_assets",
    "collections",
    "documents",
    "chunks",
    "chunk_tokens",
    "api_keys",
    "media_owners",
    "message_media",
    "media_bytes",
    "document_deletions",
    "idempotency_keys",
    "replica_progress",
    "session_turns",
}


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"sqlite_sequence"}
    finally:
        engine.dispose()


def test_upgrade_creates_the_tables_and_a_second_upgrade_is_a_no_op(database_url: str):
    assert tables(database_url) == set()
    assert current(database_url) is None
    upgrade(database_url)
    assert tables(database_url) == TABLES | {"alembic_version"}
    assert current(database_url) == head() == "0015"

    store = Store(database_url)
    sid = store.create_session().id
    store.add_message(sid, "user", "kept")
    store.migrate()  # what every server start does
    upgrade(database_url)
    assert current(database_url) == head()
    assert [m.content for m in store.get_session(sid).messages] == ["kept"]
    store.close()


# A collection row as every revision since 0004 (collections' version) can store it.
COLLECTION_ROW = (
    "INSERT INTO collections (id, tenant_id, name, chunk_tokens, overlap_tokens, "
    "created_at, version) VALUES ('col-1', '', 'c', 64, 8, '2026-01-01', 0)"
)


def rows_before(database_url: str, revision: str, *statements: str) -> None:
    """The database at `revision` with rows of that time, written by `statements`."""
    command.upgrade(alembic_config(database_url), revision)
    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            for sql in statements:
                conn.exec_driver_sql(sql)
    finally:
        engine.dispose()


def test_sessions_and_collections_from_before_0012_have_no_model(database_url: str):
    """Rows from before sessions and collections remembered their model keep NULL: served as
    before (a router's default); new ones get the model the server names."""
    rows_before(
        database_url,
        "0011",
        (
            "INSERT INTO conversations (id, tenant_id, sampling, created_at, updated_at) "
            "VALUES ('s1', '', '{}', '2026-01-01', '2026-01-01')"
        ),
        COLLECTION_ROW,
    )
    upgrade(database_url)
    store = Store(database_url)
    try:
        assert store.get_session("s1").model is None
        assert store.create_session(model="twin").model == "twin"
        assert DocumentStore(store).get_collection("", "col-1").model is None
    finally:
        store.close()
    command.downgrade(alembic_config(database_url), "0011")  # and back, the rows kept
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM conversations").scalar() == 2
    finally:
        engine.dispose()


def test_collections_from_before_0013_answer_by_retrieval(database_url: str):
    """A collection from before collections had a mode reads `retrieval` (what its questions
    did then); a new one gets the mode it is made with; the column goes on a downgrade."""
    rows_before(
        database_url,
        "0012",
        COLLECTION_ROW,
    )
    upgrade(database_url)
    store = Store(database_url)
    try:
        docs = DocumentStore(store)
        assert docs.get_collection("", "col-1").mode == "retrieval"
        assert docs.create_collection("", "n", 64, 8, None, mode="full").mode == "full"
        assert docs.update_collection("", "col-1", {"mode": "full"}).mode == "full"
        assert docs.get_collection("", "col-1").mode == "full"
    finally:
        store.close()
    command.downgrade(alembic_config(database_url), "0012")
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM collections").scalar() == 2
    finally:
        engine.dispose()


def test_documents_from_before_0014_needed_no_ocr(database_url: str):
    """A document stored before OCR (a scanned PDF was refused then) reads as one no page of
    which needed OCR, with no bytes kept; the columns go again on a downgrade, the rows stay."""
    rows_before(
        database_url,
        "0013",
        COLLECTION_ROW,
        (
            "INSERT INTO documents (id, collection_id, filename, kind, sha256, text, "
            "page_starts, metadata, status, chunks_done, chunks_total, n_tokens, created_at)"
            " VALUES ('doc-1', 'col-1', 'a.pdf', 'pdf', 'x', 'words', '[0]', '{}', 'ready',"
            " 0, 0, 0, '2026-01-01')"
        ),
    )
    upgrade(database_url)
    store = Store(database_url)
    try:
        assert DocumentStore(store).get_document("", "doc-1").ocr is None
        assert ChunkStore(store).ocr.source("doc-1") is None
    finally:
        store.close()
    command.downgrade(alembic_config(database_url), "0013")
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM documents").scalar() == 1
            columns = {c["name"] for c in inspect(conn).get_columns("documents")}
            assert not columns & {"source", "ocr", "ocr_done"}
    finally:
        engine.dispose()


def test_orm_models_match_the_migrations(database_url: str):
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_downgrade_to_base_and_back(database_url: str):
    upgrade(database_url)
    command.downgrade(alembic_config(database_url), "base")
    assert tables(database_url) == {"alembic_version"}
    upgrade(database_url)
    assert tables(database_url) == TABLES | {"alembic_version"}


def test_upgrade_through_a_given_connection(database_url: str):
    engine = make_engine(database_url, foreign_keys=False)
    try:
        with engine.connect() as conn:  # not in a transaction: alembic commits its own
            upgrade(database_url, connection=conn)
    finally:
        engine.dispose()
    assert current(database_url) == head()
    assert tables(database_url) == TABLES | {"alembic_version"}


def test_migrations_work_from_any_directory(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/cli.db"
    out = subprocess.run(
        [sys.executable, "-m", "app.db.migrate", url],
        cwd=tmp_path,
        env=THIS_CHECKOUT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"at revision {head()}" in out.stdout
    assert tables(url) == TABLES | {"alembic_version"}


def test_alembic_command_line_uses_the_repo_config(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/cli.db"
    alembic = Path(sys.executable).with_name("alembic")
    subprocess.run(
        [str(alembic), "-c", str(ROOT / "alembic.ini"), "-x", f"url={url}", "upgrade", "head"],
        cwd=tmp_path,
        env=THIS_CHECKOUT,
        capture_output=True,
        check=True,
    )
    assert current(url) == head()
