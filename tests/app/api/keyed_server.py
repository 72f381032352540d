"""A real server with API keys: keys made with `python -m app keys create` before it starts."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.server import ROOT, ServerProcess

STATIC_KEY = "static-test-key-0123456789"


def make_key(data_dir: Path, name: str, *extra: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "keys",
            "create",
            "--name",
            name,
            "--data-dir",
            str(data_dir),
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().splitlines()[-1]  # the key alone on the last line


@dataclass
class KeyedServer:
    server: ServerProcess
    data_dir: Path
    keys: dict[str, str] = field(default_factory=dict)  # name -> key

    @property
    def url(self) -> str:
        return self.server.base_url

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[name]}"}
