"""Print the project's requirements from pyproject.toml, one per line, leaving some out.

    python scripts/requirements.py [--extra NAME ...] [--without NAME ...]

`make install` installs everything but llama-cpp-python this way while llama-cpp-python's wheel
compiles beside it (pip would otherwise build the wheel itself, and only then download the
rest); the wheel goes in last with the project itself.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def name_of(requirement: str) -> str:
    """A requirement's distribution name, normalised as PEP 503 does."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not name:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", name.group(1)).lower()


def requirements(project: dict, extras: list[str], without: list[str]) -> list[str]:
    """The project's dependencies and those of `extras`, in order, without those named in
    `without` and without repeats."""
    table = project["project"]
    listed = list(table.get("dependencies", []))
    for extra in extras:
        if extra not in table.get("optional-dependencies", {}):
            raise ValueError(f"pyproject.toml has no extra {extra!r}")
        listed += table["optional-dependencies"][extra]
    left_out = {name_of(n) for n in without}
    return list(dict.fromkeys(r for r in listed if name_of(r) not in left_out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/requirements.py", allow_abbrev=False)
    p.add_argument("--extra", action="append", default=[], help="an optional-dependencies group")
    p.add_argument("--without", action="append", default=[], help="a distribution to leave out")
    args = p.parse_args(argv)
    project = tomllib.loads(PYPROJECT.read_text())
    print("\n".join(requirements(project, args.extra, args.without)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
