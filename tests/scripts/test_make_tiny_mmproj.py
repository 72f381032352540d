"""scripts/make_tiny_mmproj.py runs as the README says: executable, from any Python on PATH,
writing into a directory that does not exist yet."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_runs_directly_into_a_missing_directory(tmp_path: Path):
    out = tmp_path / "build" / "deeper" / "tiny-mmproj.gguf"
    # No venv on PATH: the script finds the project's own interpreter.
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [str(ROOT / "scripts" / "make_tiny_mmproj.py"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert out.stat().st_size > 0
