from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.cache.safe_filename import MAX_BYTES, filename_problem, path_in

BAD = [
    "",
    ".",
    "..",
    "../x",
    "x/..",
    "a..b",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "a\x00b",
    "tab\there",
    "del\x7f",
    "c1\x85",
    "\ud800.bin",  # a lone surrogate: not encodable as UTF-8
    ".hidden",
    " lead",
    "trail ",
    "trail.",
    "x" * (MAX_BYTES + 1),
    "é" * 128,  # 256 bytes
    "a:b",
    "a*b",
    "a?b",
    'a"b',
    "a<b",
    "a>b",
    "a|b",
    "a\u2215b",  # division slash
    "a\u2216b",  # set minus
    "a\uff0eb",  # fullwidth full stop
    "a\ufffdb",
    "\ufeffbom",
]
GOOD = ["slot0.bin", "a", "a.b.c", "café-état.bin", "x" * MAX_BYTES, "é" * 127 + "x", "a b"]


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_refused(name: str, tmp_path: Path):
    assert filename_problem(name) is not None
    with pytest.raises(ValueError, match="invalid filename"):
        path_in(tmp_path, name)


@pytest.mark.parametrize("name", GOOD)
def test_good_names_resolve_to_a_plain_entry_of_the_directory(name: str, tmp_path: Path):
    assert filename_problem(name) is None
    assert path_in(tmp_path, name) == tmp_path.resolve() / name


@given(st.text(), st.sampled_from(["/", "\\", "..", "\x00"]), st.text())
def test_any_name_with_a_separator_dotdot_or_nul_is_refused(a: str, bad: str, b: str):
    assert filename_problem(a + bad + b) is not None


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_every_accepted_name_is_a_file_directly_inside_the_directory(name: str):
    assume(filename_problem(name) is None)
    with tempfile.TemporaryDirectory() as d:
        base = Path(d) / "slots"
        base.mkdir()
        path = path_in(base, name)
        assert path.parent == base.resolve()
        path.write_bytes(b"x")  # the file system takes it as one name
        assert os.listdir(base) == [name]
        assert os.listdir(d) == ["slots"]


def test_a_symlink_is_refused_even_when_it_points_inside(tmp_path: Path):
    (tmp_path / "real.bin").write_bytes(b"x")
    (tmp_path / "link.bin").symlink_to(tmp_path / "real.bin")
    (tmp_path / "out.bin").symlink_to("/etc/passwd")
    for name in ("link.bin", "out.bin"):
        with pytest.raises(ValueError, match="does not name a file"):
            path_in(tmp_path, name)


def test_the_directory_need_not_exist(tmp_path: Path):
    assert path_in(tmp_path / "later", "a.bin") == (tmp_path / "later" / "a.bin").resolve()
