"""scripts/conformance: the shim that starts ours for llama.cpp's server tests, and the plugin
that reads the intended differences from docs/llama-server.md."""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "scripts" / "conformance"
sys.path.insert(0, str(HERE))
import conformance_plugin as plugin  # noqa: E402


def load(path: Path, name: str):  # noqa: ANN201 (a script loaded from its file)
    """A script of scripts/conformance as a module (`llama-server` has no .py name)."""
    loader = SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def shim():  # noqa: ANN201
    return load(HERE / "llama-server", "llama_server_shim")


def run_module():  # noqa: ANN201
    return load(HERE / "run.py", "conformance_run")


def test_the_shim_swaps_the_downloads_for_the_packaged_model_and_keeps_the_rest():
    s = shim()
    argv = ["--port", "9", "--temp", "0.8", "--offline", "--hf-repo", "ggml-org/x"]
    argv += ["--hf-file", "a.gguf", "--cont-batching", "--pooling", "last", "--no-slots"]
    kept, asked = s.without(argv, {**dict.fromkeys(s.MODEL_FLAGS, True), **s.DROPPED})
    assert asked and kept == ["--port", "9", "--temp", "0.8", "--no-slots"]


def test_the_differences_table_is_read_from_the_doc(tmp_path: Path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        "text\n<!-- conformance:start -->\n| test | why |\n|---|---|\n"
        "| `unit/test_a.py::test_b[x-1]` | because   it is so |\n"
        "<!-- conformance:end -->\n| `unit/test_c.py::test_d` | outside the table |\n"
    )
    assert plugin.read_differences(doc) == {"unit/test_a.py::test_b[x-1]": "because it is so"}
    doc.write_text("no table\n")
    with pytest.raises(pytest.UsageError):
        plugin.read_differences(doc)


def test_the_intended_differences_are_few_and_each_says_why():
    differences = plugin.read_differences(ROOT / "docs" / "llama-server.md")
    assert len(differences) < 15
    for nodeid, reason in differences.items():
        assert nodeid.startswith("unit/test_") and "::" in nodeid
        assert len(reason.split()) >= 5, nodeid


def test_the_features_not_served_are_read_from_the_doc_and_each_says_why(tmp_path: Path):
    run = run_module()
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- conformance-files:start -->\n| file | why |\n|---|---|\n"
        "| `unit/test_x.py` | a feature   not here |\n<!-- conformance-files:end -->\n"
        "| `unit/test_y.py` | outside the table |\n"
    )
    assert run.not_served(doc) == {"unit/test_x.py": "a feature not here"}
    files = run.not_served()  # the real table
    assert files and all(len(why.split()) >= 5 for why in files.values())
    doc.write_text("no table\n")
    with pytest.raises(SystemExit):
        run.not_served(doc)


def test_the_passes_file_keeps_ids_with_spaces_whole():
    run = run_module()
    recorded = run.PASSES.read_text().splitlines()
    spaced = [line for line in recorded if " " in line]
    assert spaced, "the record holds ids with spaces (parametrised prompts)"
    files = run.test_files([], record=False)
    assert all(f.startswith("unit/test_") and f.endswith(".py") for f in files)
