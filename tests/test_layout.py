"""The layout a newcomer reads: no crowded folder under app/, no two modules under app/ with one
name, and docs/development.md's map naming every folder of modules under app/ and bench/ and no
folder that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "development.md"
MAX_MODULES = 15
NOT_MODULES = ("__init__.py", "__main__.py")  # a package's own files: every package has them


def modules_under(folder: Path) -> list[Path]:
    """Every module under `folder`, at any depth, but for the packages' own files."""
    return sorted(
        p
        for p in folder.rglob("*.py")
        if p.name not in NOT_MODULES and "__pycache__" not in p.parts
    )


def folders_of_modules(top: str) -> set[str]:
    """The folders under ROOT/top (top included) that hold a Python file."""
    return {
        p.parent.relative_to(ROOT).as_posix()
        for p in (ROOT / top).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def mapped_folders(text: str) -> list[str]:
    """The folders of the map's rows: the first cell's `path/` of each row of the Layout table."""
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w./-]+?)/?` [^|]*\|", layout, re.M)


def test_no_folder_under_app_holds_more_than_15_modules():
    crowded = {}
    for folder in folders_of_modules("app"):
        path = ROOT / folder
        n = sum(1 for p in path.glob("*.py") if p.name not in NOT_MODULES)
        if n > MAX_MODULES:
            crowded[folder] = n
    assert crowded == {}


def test_no_two_modules_under_app_share_a_name():
    seen: dict[str, list[str]] = {}
    for path in modules_under(ROOT / "app"):
        seen.setdefault(path.name, []).append(path.relative_to(ROOT).as_posix())
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_the_map_names_every_folder_of_app_and_bench():
    mapped = set(mapped_folders(MAP.read_text(encoding="utf-8")))
    assert (folders_of_modules("app") | folders_of_modules("bench")) - mapped == set()


def test_every_folder_in_the_map_exists():
    rows = mapped_folders(MAP.read_text(encoding="utf-8"))
    missing = [f for f in rows if not (ROOT / f).is_dir()]
    assert missing == []


def test_the_map_is_read_as_written():
    rows = mapped_folders(MAP.read_text(encoding="utf-8"))
    # The rows a reader finds first, and one under bench/: the parser sees what the table says.
    assert rows[:3] == ["app", "app/api", "app/api/middleware"]
    assert "bench/lib" in rows
    assert len(rows) == len(set(rows)), "a folder with two rows"
    text = "## Layout\n\n| folder | holds |\n|---|---|\n| `app/` (root) | x |\n| `gone/` | y |\n"
    assert mapped_folders(text) == ["app", "gone"]
