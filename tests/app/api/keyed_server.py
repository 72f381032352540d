"""A real server with API keys: keys made with `python -m app keys create` before it starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.lib.server_process import ServerProcess

STATIC_KEY = "static-test-key-0123456789"


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
