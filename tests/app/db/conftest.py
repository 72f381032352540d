from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db.store import Store
from tests.db_urls import BACKENDS, fresh_database_url


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database, once on SQLite and once on PostgreSQL (skipped without a server)."""
    with fresh_database_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    s = Store(database_url)
    s.migrate()
    try:
        yield s
    finally:
        s.close()
