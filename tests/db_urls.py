"""Fresh, empty databases for tests, on SQLite or PostgreSQL.

    with fresh_database_url("postgresql", tmp_path) as url:
        store = Store(url)

PostgreSQL needs a server: KVCHAT_TEST_POSTGRES_URL (`make test` starts one with
scripts/postgres.sh and sets it). Without it the PostgreSQL cases are skipped, so a plain
`pytest` still runs everything else. Each use gets its own database on that server, dropped
afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from app.db.sql_engine import normalize_url
from app.db.store import Store

POSTGRES_ENV = "KVCHAT_TEST_POSTGRES_URL"
BACKENDS = ("sqlite", "postgresql")


def postgres_server_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


@contextmanager
def fresh_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database; skips the test when PostgreSQL is asked for but not set."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/t.db"
        return
    if backend != "postgresql":
        raise ValueError(f"unknown database backend {backend!r}")
    server = postgres_server_url()
    if server is None:
        pytest.skip(f"PostgreSQL: {POSTGRES_ENV} is not set (make test starts a server)")
    name = f"kvchat_t_{uuid4().hex[:16]}"
    # CREATE/DROP DATABASE cannot run inside a transaction: autocommit. NullPool: no
    # connection stays open to the server's database between tests.
    admin = create_engine(normalize_url(server), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield normalize_url(server).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                # FORCE: a test that failed may have left a connection open (PostgreSQL 13+).
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def migrated_store(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A `Store` on a fresh, migrated database of `backend`, closed after."""
    with fresh_database_url(backend, tmp_path) as url:
        store = Store(url)
        store.migrate()
        try:
            yield store
        finally:
            store.close()
