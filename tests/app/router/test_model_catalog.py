"""app/router/model_catalog.py: a models dir read as llama-server reads it (files, folders with
their projector, split models, companions skipped), a preset INI (sections, `[*]`, paths
relative to the file, reserved keys dropped), the preset over the dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.router.model_catalog import CatalogError, catalog, read_preset, scan_models_dir


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF")
    return path


def test_a_models_dir_has_files_and_folders(tmp_path: Path) -> None:
    touch(tmp_path / "small.gguf")
    touch(tmp_path / "mmproj-small.gguf")  # a companion alone is no model
    touch(tmp_path / "draft-small.gguf")
    touch(tmp_path / "vision" / "model-q4.gguf")
    touch(tmp_path / "vision" / "mmproj-f16.gguf")
    touch(tmp_path / "big" / "big-00001-of-00002.gguf")
    touch(tmp_path / "big" / "big-00002-of-00002.gguf")
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    found = scan_models_dir(tmp_path)
    assert sorted(found) == ["big", "small", "vision"]
    assert found["small"].args() == ["-m", str(tmp_path / "small.gguf")]
    assert found["vision"].mmproj == str(tmp_path / "vision" / "mmproj-f16.gguf")
    assert found["big"].path.endswith("big-00001-of-00002.gguf")


def test_a_preset_has_sections_a_shared_section_and_relative_paths(tmp_path: Path) -> None:
    touch(tmp_path / "m" / "a.gguf")
    preset = tmp_path / "models.ini"
    preset.write_text(
        "[*]\nctx-size = 2048\nport = 9\n\n"
        "[org/a:Q4]\nmodel = m/a.gguf\nmmproj = m/p.gguf\nparallel = 2\n\n"
        "[b]\nmodel = /abs/b.gguf\nctx-size = 4096\nswa-full =\n"
    )
    found = read_preset(preset)
    a, b = found["org/a:Q4"], found["b"]
    assert a.path == str(tmp_path / "m" / "a.gguf") and a.mmproj == str(tmp_path / "m" / "p.gguf")
    assert a.options == {"ctx-size": "2048", "parallel": "2"}  # port is the router's to give
    assert b.args() == ["-m", "/abs/b.gguf", "--ctx-size", "4096", "--swa-full"]


@pytest.mark.parametrize(
    "text", ["[a]\nctx-size = 1\n", "no section\n", "[a]\nmodel = x\n[a]\nmodel = y\n"]
)
def test_a_bad_preset_is_refused_with_the_reason(tmp_path: Path, text: str) -> None:
    preset = tmp_path / "p.ini"
    preset.write_text(text)
    with pytest.raises(CatalogError, match="--models-preset"):
        read_preset(preset)


def test_the_preset_overrides_the_dir_and_names_are_sorted(tmp_path: Path) -> None:
    touch(tmp_path / "dir" / "z.gguf")
    touch(tmp_path / "dir" / "a.gguf")
    preset = tmp_path / "p.ini"
    preset.write_text("[a]\nmodel = other.gguf\n")
    found = catalog(str(tmp_path / "dir"), str(preset))
    assert list(found) == ["a", "z"] and found["a"].path == str(tmp_path / "other.gguf")
    with pytest.raises(CatalogError, match="not a directory"):
        catalog(str(tmp_path / "missing"), None)
