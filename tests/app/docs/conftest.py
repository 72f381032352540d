"""A migrated SQLite store of a test's own, for the document services' tests (a module that
needs other databases defines its own `store`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.db.store import Store


@pytest.fixture
def store(tmp_path: Path):
    s = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    s.migrate()
    yield s
    s.close()
