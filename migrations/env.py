"""Alembic environment: run by `alembic ...` on the command line and by app/db/migrate.py.

Database URL, first found: a connection in config.attributes["connection"], `-x url=...`,
sqlalchemy.url in the config, KVCHAT_DATABASE_URL / DATABASE_URL via the app's settings.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, text

# Each module of ORM models adds its tables to Base.metadata when imported: import every one.
import app.db.documents.document_models  # noqa: F401
import app.db.replicas.replica_models  # noqa: F401
from app.db.models import Base
from app.db.sql_engine import WRITE_OPTION, make_engine, normalize_url

config = context.config
target_metadata = Base.metadata

# Any fixed number: PostgreSQL advisory lock held while migrating, so two servers starting at
# once do not both create the tables (the second waits, then finds the schema at head).
MIGRATION_LOCK_KEY = 4_417_172_001

# Only the command line configures logging from alembic.ini; app/db/migrate.py builds its
# Config without a file, so the app's own logging setup stays as it is.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if url:
        return url
    from app.config import Settings  # command line without a URL: the server's own default

    return Settings().database()


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode recreates the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_on(connection)
        return
    # foreign_keys off: a batch migration drops and recreates tables, which with enforcement on
    # would cascade-delete every message. WRITE_OPTION: SQLite takes the write lock at BEGIN,
    # so concurrent migrators queue up (and the whole upgrade is one transaction).
    engine = make_engine(database_url(), foreign_keys=False)
    try:
        with engine.execution_options(**{WRITE_OPTION: True}).connect() as connection:
            run_on(connection)
            if connection.dialect.name == "sqlite":
                # Recreated tables must still satisfy the foreign keys that were switched off.
                bad = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if bad:
                    raise RuntimeError(f"foreign key violations after migrating: {bad[:10]}")
    finally:
        engine.dispose()


def run_offline() -> None:
    """`alembic upgrade --sql`: print the SQL instead of running it."""
    context.configure(
        url=normalize_url(database_url()),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
