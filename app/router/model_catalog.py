"""The models a router serves: every GGUF under `--models-dir`, and the sections of a
`--models-preset` INI file, as llama-server reads them.

`--models-dir DIR`: a GGUF file directly in DIR is a model named after the file (without
`.gguf`); a folder in DIR is a model named after the folder, its GGUF the one that is neither a
projector (`mmproj` in the name, paired with it) nor a draft model, the first shard of a split
one where there are shards. Files of other types are ignored.

`--models-preset FILE`: an INI file whose sections are models (`[name]`), each key a flag of
ours without its dashes (`model = PATH`, `mmproj = PATH`, `ctx-size = 4096`, ...). A `[*]`
section gives every model its keys, which a model's own section overrides. A preset model
overrides a models-dir model of the same name.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass, field
from pathlib import Path

GLOBAL_SECTION = "*"
# Keys a section cannot set: the router gives each child its own address and data.
RESERVED = ("host", "port", "data-dir", "database-url", "models-dir", "models-preset")
DRAFT_PREFIXES = ("draft-", "draft_")


class CatalogError(ValueError):
    """The models dir or the preset file cannot be read as a catalogue."""


@dataclass(slots=True)
class ModelSpec:
    name: str
    path: str  # the GGUF (the first shard of a split one)
    mmproj: str | None = None
    # Flags for this model's server, as `--key value` pairs ("" for a flag without a value).
    options: dict[str, str] = field(default_factory=dict)

    def args(self) -> list[str]:
        """The child server's model flags: -m, --mmproj and the preset's options."""
        out = ["-m", self.path]
        if self.mmproj:
            out += ["--mmproj", self.mmproj]
        for key, value in self.options.items():
            out += [f"--{key}"] + ([value] if value != "" else [])
        return out


def _is_projector(name: str) -> bool:
    return "mmproj" in name


def _is_draft(name: str) -> bool:
    return name.startswith(DRAFT_PREFIXES)


def _is_companion(name: str) -> bool:
    """A projector or a draft model: loaded with a model, never as one."""
    return _is_projector(name) or _is_draft(name)


def scan_models_dir(folder: Path) -> dict[str, ModelSpec]:
    """The models of a models dir, by name."""
    if not folder.is_dir():
        raise CatalogError(f"--models-dir {folder} does not exist or is not a directory")
    out: dict[str, ModelSpec] = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            spec = _folder_model(entry)
            if spec is not None:
                out[spec.name] = spec
        elif entry.suffix == ".gguf" and not _is_companion(entry.name):
            out[entry.stem] = ModelSpec(entry.stem, str(entry))
    return out


def _folder_model(folder: Path) -> ModelSpec | None:
    model = shard = mmproj = None
    for f in sorted(folder.glob("*.gguf")):
        if _is_projector(f.name):
            mmproj = f
        elif _is_draft(f.name):
            continue
        elif "-00001-of-" in f.name:
            shard = f
        else:
            model = f
    main = shard or model
    if main is None:
        return None
    return ModelSpec(folder.name, str(main), str(mmproj) if mmproj else None)


def read_preset(path: Path) -> dict[str, ModelSpec]:
    """The models of a preset INI file, by section name."""
    parser = configparser.ConfigParser(interpolation=None, default_section="\0none")
    parser.optionxform = str  # keys as written
    try:
        with path.open(encoding="utf-8") as f:
            parser.read_file(f)
    except (OSError, configparser.Error) as e:
        raise CatalogError(f"--models-preset {path}: {e}") from None
    shared = dict(parser[GLOBAL_SECTION]) if parser.has_section(GLOBAL_SECTION) else {}
    out: dict[str, ModelSpec] = {}
    for name in parser.sections():
        if name == GLOBAL_SECTION:
            continue
        options = {_flag(k): v.strip() for k, v in {**shared, **parser[name]}.items()}
        for key in RESERVED:
            options.pop(key, None)
        model = options.pop("model", None) or options.pop("m", None)
        if not model:
            raise CatalogError(f"--models-preset {path}: [{name}] names no model (model = PATH)")
        mmproj = options.pop("mmproj", None)
        out[name] = ModelSpec(name, str(_resolve(path, model)), _opt_path(path, mmproj), options)
    return out


def _flag(key: str) -> str:
    return key.strip().lstrip("-").replace("_", "-").lower()


def _resolve(preset: Path, value: str) -> Path:
    """A path in a preset is relative to the preset file's folder."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else preset.parent / p


def _opt_path(preset: Path, value: str | None) -> str | None:
    return str(_resolve(preset, value)) if value else None


def catalog(models_dir: str | None, preset: str | None) -> dict[str, ModelSpec]:
    """Every model the router serves, sorted by name: the dir's, then the preset's over them."""
    out: dict[str, ModelSpec] = {}
    if models_dir:
        out.update(scan_models_dir(Path(models_dir)))
    if preset:
        out.update(read_preset(Path(preset)))
    return dict(sorted(out.items()))
