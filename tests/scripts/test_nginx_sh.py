"""scripts/nginx.sh prints the nginx binary's path, alone on stdout (`make test` and
`make cluster` run it first, installing nginx-light when it is missing)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_prints_the_path_of_a_working_nginx():
    out = subprocess.run(
        [str(ROOT / "scripts" / "nginx.sh")], capture_output=True, text=True, check=True
    ).stdout
    path = out.strip()
    assert out.count("\n") == 1 and os.access(path, os.X_OK)
    version = subprocess.run([path, "-v"], capture_output=True, text=True, check=True)
    assert "nginx/" in version.stderr
