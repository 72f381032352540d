from __future__ import annotations

import pytest

from app.config import packaged_model_path


@pytest.fixture(scope="session")
def model_path() -> str:
    return packaged_model_path()
