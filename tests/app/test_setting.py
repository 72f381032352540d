"""app/setting.py: a setting declared once gives its flag, environment variable, help and engine
field; the real Settings declare every EngineConfig field and no flag twice."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Literal

import pytest
from pydantic import AliasChoices, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config import Settings
from app.engine.engine_config import EngineConfig
from app.setting import add_flags, setting, settings_info


class Toy(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TOY_", use_attribute_docstrings=True)

    size: int = setting(8, "-s", "--size", group="A", engine="n_size", ge=1, le=64)
    """how big"""
    budget: int = setting(2, "--budget", group="A", engine=True, to_engine="MiB -> bytes")
    """MiB"""
    mode: Literal["x", "y"] = setting("x", "--mode", group="B")
    """which mode"""
    cache: bool = setting(True, "--no-cache", group="B")
    """turn it off"""
    loud: bool = setting(False, "--loud", group="B")
    """turn it on"""
    park: bool = setting(True, "--park", group="B")
    """on by default, both ways"""
    key: str | None = setting(
        None, "--key", group="B", validation_alias=AliasChoices("TOY_KEY", "OTHER_KEY", "key")
    )
    """a key"""


def parse(*argv: str) -> dict[str, object]:
    p = argparse.ArgumentParser(allow_abbrev=False)
    add_flags(p, settings_info(Toy))
    return {k: v for k, v in vars(p.parse_args(list(argv))).items() if v is not None}


def test_a_declaration_reads_back_whole():
    size, budget, mode, cache, loud, park, key = settings_info(Toy)
    assert (size.flags, size.envs, size.kind, size.default) == (
        ("-s", "--size"),
        ("TOY_SIZE",),
        int,
        8,
    )
    assert (size.help, size.group, size.engine, size.bounds) == ("how big", "A", "n_size", (1, 64))
    assert (budget.engine, budget.engine_value(3)) == ("budget", 3 << 20)
    assert (mode.kind, mode.choices) == (str, ("x", "y"))
    assert (key.optional, key.envs) == (True, ("TOY_KEY", "OTHER_KEY"))
    assert [i.bool_action for i in (cache, loud, park)] == ["store_false", "store_true", "both"]
    assert park.all_flags == ("--park", "--no-park")


def test_flags_come_from_the_declarations_and_leave_unset_settings_to_the_environment(
    monkeypatch: pytest.MonkeyPatch,
):
    assert parse() == {}
    assert parse("-s", "3", "--mode", "y", "--no-cache", "--loud", "--no-park", "--key", "k") == {
        "size": 3,
        "mode": "y",
        "cache": False,
        "loud": True,
        "park": False,
        "key": "k",
    }
    with pytest.raises(SystemExit):
        parse("--mode", "z")
    monkeypatch.setenv("TOY_SIZE", "5")
    monkeypatch.setenv("OTHER_KEY", "from-env")
    toy = Toy(**parse("--no-cache"))
    assert (toy.size, toy.key, toy.cache) == (5, "from-env", False)
    assert Toy(**parse("--key", "flag")).key == "flag"
    with pytest.raises(ValidationError):
        Toy(**parse("-s", "65"))


def test_bad_declarations_are_refused():
    with pytest.raises(ValueError):
        setting(1, group="A")  # no flag
    with pytest.raises(ValueError):
        setting(1, "size", group="A")
    with pytest.raises(ValueError):
        setting(1, "--size", group="A", engine="n", to_engine="furlongs")

    class Plain(BaseSettings):
        size: int = 1

    with pytest.raises(TypeError, match="setting()"):
        settings_info(Plain)


def test_every_engine_config_field_is_fed_by_one_setting():
    fed = [i.engine for i in settings_info(Settings) if i.engine]
    assert sorted(fed) == sorted(f.name for f in fields(EngineConfig))


def test_no_flag_or_environment_variable_is_declared_twice():
    infos = settings_info(Settings)
    flags = [f for i in infos for f in i.all_flags]
    envs = [e for i in infos for e in i.envs]
    assert len(flags) == len(set(flags)) and len(envs) == len(set(envs))
    assert all(i.help and i.group for i in infos)  # every setting has its docstring
