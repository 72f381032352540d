"""The onnx-int8 model: exported once from the packaged weights into a cache folder, reused."""

from __future__ import annotations

from pathlib import Path

from rag.model_files import packaged_model_dir
from rag.onnx_export import FILENAME, exported_model, model_digest


def test_the_model_is_exported_once_and_then_read_from_its_cache(tmp_path: Path):
    path = exported_model(root=tmp_path)
    assert path.name == FILENAME and path.parent.parent == tmp_path
    assert model_digest(Path(packaged_model_dir())) in path.parent.name
    written = path.stat().st_mtime_ns
    assert exported_model(root=tmp_path) == path
    assert path.stat().st_mtime_ns == written  # not made again
    assert [p.name for p in path.parent.iterdir() if p.name != ".lock"] == [FILENAME]
