"""scripts/requirements.py: what `make install` has pip fetch while llama-cpp-python compiles."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests.server import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import requirements  # noqa: E402  (scripts/ is not a package)

PROJECT = {
    "project": {
        "dependencies": ["llama-cpp-python==0.3.36", "fastapi>=0.115", "psycopg[binary]>=3.1"],
        "optional-dependencies": {
            "dev": ["pytest>=8", "Llama_CPP.Python[server]==0.3.36", "fastapi>=0.115"]
        },
    }
}


def test_the_named_distribution_is_left_out_however_it_is_spelled():
    got = requirements.requirements(PROJECT, ["dev"], ["llama-cpp-python"])
    assert got == ["fastapi>=0.115", "psycopg[binary]>=3.1", "pytest>=8"]


def test_without_extras_only_the_dependencies_come():
    assert requirements.requirements(PROJECT, [], []) == PROJECT["project"]["dependencies"]


def test_an_unknown_extra_is_refused():
    with pytest.raises(ValueError, match="no extra 'docs'"):
        requirements.requirements(PROJECT, ["docs"], [])


def test_the_real_pyproject_less_llama_cpp_python_is_everything_else():
    """Everything the project and its dev extra need but llama-cpp-python, which the wheel and
    the final `pip install -e .[dev]` bring."""
    done = subprocess.run(
        [
            sys.executable,
            "scripts/requirements.py",
            "--extra",
            "dev",
            "--without",
            "llama-cpp-python",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    got = done.stdout.split()
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = table["dependencies"] + table["optional-dependencies"]["dev"]
    assert set(got) == {r for r in listed if not r.startswith("llama-cpp-python")}
    assert "fastapi>=0.115" in got and "pytest>=8" in got
