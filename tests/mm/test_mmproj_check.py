from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from bench.lib.server_process import ROOT
from mm.mmproj_check import MmprojError, check_mmproj


def write(path: Path, fields: dict[str, tuple[object, str]], tensors: list[str]) -> str:
    w = GGUFWriter(str(path), "clip")
    for key, (value, kind) in fields.items():
        getattr(w, f"add_{kind}")(key, value)
    for name in tensors:
        w.add_tensor(name, np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


MLP = ["mm.0.weight", "mm.0.bias", "mm.2.weight", "mm.2.bias"]


def test_the_tiny_projector_passes(tmp_path: Path):
    out = tmp_path / "tiny.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    check_mmproj(str(out))


def test_a_wrongly_typed_value_is_refused_by_name(tmp_path: Path):
    path = write(
        tmp_path / "bad.gguf",
        {"clip.projector_type": ("mlp", "string"), "clip.vision.image_size": (64, "int32")},
        MLP,
    )
    with pytest.raises(MmprojError, match="clip.vision.image_size must be UINT32, not INT32"):
        check_mmproj(path)


def test_a_missing_mlp_tensor_is_refused(tmp_path: Path):
    fields = {"clip.projector_type": ("mlp", "string"), "clip.vision.image_size": (64, "uint32")}
    path = write(tmp_path / "bad.gguf", fields, MLP[:3])
    with pytest.raises(MmprojError, match="mm.2.bias"):
        check_mmproj(path)


def test_not_a_gguf_file(tmp_path: Path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"hello")
    with pytest.raises(MmprojError, match="not a readable GGUF"):
        check_mmproj(str(path))


def test_a_server_given_a_bad_projector_stops_with_the_reason(tmp_path: Path):
    from bench.lib.server_process import ServerProcess

    fields = {"clip.projector_type": ("mlp", "string"), "clip.vision.image_size": (64, "int32")}
    bad = write(tmp_path / "bad.gguf", fields, MLP)
    srv = ServerProcess("-np", "1", "-c", "512", "--mmproj", bad)
    with pytest.raises(RuntimeError, match="must be UINT32") as err:
        srv.start()
    assert "exited with -" not in str(err.value)  # stopped by the check, not killed by a signal
