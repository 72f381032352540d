"""docs/configuration.md is generated from the settings' declarations and must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.config import Settings
from app.config_reference import markdown
from app.setting import settings_info

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "configuration.md"


def test_the_reference_in_docs_is_what_the_declarations_generate():
    assert REFERENCE.read_text() == markdown(), (
        "docs/configuration.md is stale: python -m app.config_reference > docs/configuration.md"
    )


def test_the_reference_lists_every_flag_and_environment_variable():
    text = markdown()
    for info in settings_info(Settings):
        for name in (*info.all_flags, *info.envs):
            assert f"`{name}`" in text, name


def test_the_module_prints_the_reference():
    out = subprocess.run(
        [sys.executable, "-m", "app.config_reference"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == markdown()
