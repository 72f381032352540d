"""The SQLAlchemy engine of this app's database: URL normalisation and SQLite's set-up.

`Store` and the migrations (app/db/migrate.py, migrations/env.py) both open their engines here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

# Execution option asking the SQLite engine for BEGIN IMMEDIATE (see make_engine).
WRITE_OPTION = "kvchat_write"


def normalize_url(url: str | URL) -> URL:
    """postgresql:// and postgres:// mean psycopg 3 here (SQLAlchemy's default is psycopg2,
    which is not installed)."""
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u


def make_engine(url: str | URL, *, foreign_keys: bool = True) -> Engine:
    """An engine set up for this app; Alembic's env.py uses it too (with foreign_keys=False,
    because SQLite's batch migrations recreate tables and would otherwise cascade deletes)."""
    u = normalize_url(url)
    if u.get_backend_name() != "sqlite":
        # pre_ping: a pooled connection may have died with a database restart.
        return create_engine(u, pool_pre_ping=True)
    if u.database and u.database != ":memory:" and not u.database.startswith("file:"):
        Path(u.database).parent.mkdir(parents=True, exist_ok=True)
    # check_same_thread off: pooled connections move between asyncio.to_thread workers (one at a
    # time). timeout: how long a writer waits for another writer's lock before failing.
    engine = create_engine(u, connect_args={"check_same_thread": False, "timeout": 30.0})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take BEGIN away from the sqlite3 module (it skips it before SELECT and DDL, so reads
        # would not be repeatable and migrations not atomic); _on_begin emits it instead.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
        cur.execute("PRAGMA synchronous=FULL")  # a commit survives power loss, not just a crash
        cur.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")  # off by default
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A write transaction takes the write lock up front. A deferred one that reads first
        # and then writes cannot wait for a concurrent writer: SQLite fails it at once with
        # "database is locked", whereas BEGIN IMMEDIATE waits up to `timeout`.
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
