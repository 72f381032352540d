"""Run the Alembic migrations from code (the server does this on every start).

`python -m app.db.migrate URL` does the same from a shell; `alembic` with the repo's
alembic.ini works as well.
"""

from __future__ import annotations

import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection

# migrations/ lives at the repository root, next to app/ (the package is installed editable),
# found from this file so that any working directory works.
MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str, connection: Connection | None = None) -> Config:
    """A Config built without alembic.ini: env.py then leaves the app's logging alone."""
    if not (MIGRATIONS_DIR / "env.py").is_file():
        raise FileNotFoundError(f"no Alembic environment at {MIGRATIONS_DIR}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    # The config is a ConfigParser: a literal % (e.g. in an encoded password) must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(url: str, connection: Connection | None = None) -> None:
    """Migrate the database at `url` to the newest revision; a no-op if it is already there.

    With `connection`, env.py migrates through it instead of opening its own engine: in a
    transaction of its own that it commits, or inside the caller's if one is open. On SQLite
    such a connection should have foreign keys off (make_engine(url, foreign_keys=False)).
    """
    command.upgrade(alembic_config(url, connection), "head")


def current(url: str) -> str | None:
    """The database's revision (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    from app.db.sql_engine import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head() -> str | None:
    """The newest revision in migrations/versions."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m app.db.migrate DATABASE_URL")
    upgrade(sys.argv[1])
    print(f"{sys.argv[1]}: at revision {current(sys.argv[1])}")
