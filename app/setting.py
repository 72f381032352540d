"""One setting, declared once: `setting()` makes the pydantic field of `app.config.Settings`
and keeps on it what the CLI, the engine mapping and the reference need (flags, help, group,
the `EngineConfig` field it feeds); `SettingInfo` reads a declaration back.

Derived from the declarations: the argparse flags (`add_flags`, app/__main__.py),
`Settings.engine_config()` and docs/configuration.md (app/config_reference.py).
Environment variables are pydantic-settings' own: the prefix plus the field name, or the
field's `validation_alias` choices when it has them.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from annotated_types import Ge, Le
from pydantic import AliasChoices, Field
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

# How a setting's value becomes its EngineConfig field's value, by name (names, not functions,
# so the field's json_schema_extra stays plain data).
TO_ENGINE: dict[str, Callable[[Any], Any]] = {
    "MiB -> bytes": lambda mib: mib << 20,
    "MiB -> bytes, -1: no limit": lambda mib: (1 << 62) if mib < 0 else mib << 20,
    "0 -> None": lambda value: value or None,
}


def setting(
    default: Any,
    *flags: str,
    group: str,
    engine: str | bool = False,
    to_engine: str | None = None,
    **field: Any,
) -> Any:
    """A `Settings` field: `flags` are llama-server's names; `engine` names the EngineConfig
    field it feeds (True: the field of the setting's own name), through the named `to_engine`
    conversion if any; `field` goes to pydantic (ge, le, validation_alias). The help is the
    docstring under the field (the model's `use_attribute_docstrings`)."""
    if not flags or not all(f.startswith("-") for f in flags):
        raise ValueError(f"flags must be given and start with '-': {flags!r}")
    if to_engine is not None and (not engine or to_engine not in TO_ENGINE):
        raise ValueError(f"unknown conversion {to_engine!r} (or no engine field)")
    extra = {"flags": list(flags), "group": group, "engine": engine, "to_engine": to_engine}
    return Field(default=default, json_schema_extra=extra, **field)


@dataclass(slots=True, frozen=True)
class SettingInfo:
    """A declaration read back from its field."""

    name: str
    flags: tuple[str, ...]
    envs: tuple[str, ...]
    kind: type  # int, float, str or bool
    choices: tuple[str, ...] | None
    optional: bool  # None is a value (unset)
    default: Any
    help: str
    group: str
    engine: str | None
    to_engine: str | None
    bounds: tuple[float | None, float | None]  # ge, le

    @property
    def bool_action(self) -> str | None:
        """How a bool's flags read: `--no-x` only turns it off, a flag whose default is off
        only turns it on, and one on by default gets both `--x` and `--no-x`."""
        if self.kind is not bool:
            return None
        if all(f.startswith("--no-") for f in self.flags):
            return "store_false"
        return "store_true" if self.default is False else "both"

    @property
    def all_flags(self) -> tuple[str, ...]:
        if self.bool_action == "both":
            return (*self.flags, *("--no-" + f[2:] for f in self.flags if f.startswith("--")))
        return self.flags

    @property
    def default_text(self) -> str:
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return str(self.default)

    def engine_value(self, value: Any) -> Any:
        return TO_ENGINE[self.to_engine](value) if self.to_engine else value


def settings_info(model: type[BaseSettings]) -> list[SettingInfo]:
    """Every declared setting of `model`, in declaration order."""
    prefix = model.model_config.get("env_prefix", "")
    return [_info(name, f, prefix) for name, f in model.model_fields.items()]


def add_flags(parser: argparse.ArgumentParser, infos: list[SettingInfo]) -> None:
    """One argparse option per setting. Defaults are None so that a flag left out leaves the
    environment's value (or the field's default) in place."""
    for info in infos:
        action = info.bool_action
        shown = info.default is not None and action in (None, "both")
        help_text = info.help + (f" (default: {info.default_text})" if shown else "")
        options: dict[str, Any] = {"dest": info.name, "default": None}
        options["help"] = help_text.replace("%", "%%")
        if action == "both":
            options["action"] = argparse.BooleanOptionalAction
        elif action is not None:
            options["action"] = action
        else:
            if info.kind is not str:
                options["type"] = info.kind
            if info.choices:
                options["choices"] = list(info.choices)
        parser.add_argument(*info.flags, **options)


def _info(name: str, f: FieldInfo, env_prefix: str) -> SettingInfo:
    extra = f.json_schema_extra
    if not isinstance(extra, dict) or "flags" not in extra:
        raise TypeError(f"Settings.{name} is not declared with setting()")
    kind, choices, optional = _kind(f.annotation)
    engine = extra.get("engine")
    ge = next((m.ge for m in f.metadata if isinstance(m, Ge)), None)
    le = next((m.le for m in f.metadata if isinstance(m, Le)), None)
    return SettingInfo(
        name=name,
        flags=tuple(extra["flags"]),
        envs=_envs(name, f, env_prefix),
        kind=kind,
        choices=choices,
        optional=optional,
        default=f.default,
        # Read from the source by pydantic: empty only where the source is not installed.
        help=" ".join((f.description or "").split()),
        group=str(extra["group"]),
        engine=name if engine is True else (engine or None),
        to_engine=extra.get("to_engine"),
        bounds=(ge, le),
    )


def _envs(name: str, f: FieldInfo, env_prefix: str) -> tuple[str, ...]:
    alias = f.validation_alias
    if isinstance(alias, AliasChoices):
        # Lower-case choices are there for Settings(name=...) from the CLI, not for users.
        return tuple(c for c in alias.choices if isinstance(c, str) and c.isupper())
    return ((env_prefix + name).upper(),)


def _kind(annotation: Any) -> tuple[type, tuple[str, ...] | None, bool]:
    args = typing.get_args(annotation)
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    optional = union and type(None) in args
    if optional:
        (annotation,) = [a for a in args if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return str, tuple(typing.get_args(annotation)), optional
    if annotation in (int, float, str, bool):
        return annotation, None, optional
    raise TypeError(f"unsupported setting type {annotation!r}")
