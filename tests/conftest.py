from __future__ import annotations

import pytest

from app.config import packaged_model_path


@pytest.fixture(scope="session")
def model_path() -> str:
    return packaged_model_path()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests last: pytest-playwright's session-wide Playwright keeps an event loop
    running on the main thread from its first use on, and `asyncio.run` in any later test would
    fail ("cannot be called from a running event loop")."""
    items.sort(key=lambda item: "tests/frontend/" in item.nodeid.replace("\\", "/"))
