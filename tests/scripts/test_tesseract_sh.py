"""scripts/tesseract.sh prints the tesseract binary's path, alone on stdout (`make install`
runs it, installing Debian's tesseract-ocr with its English data when it is missing)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_prints_the_path_of_a_tesseract_that_reads_english():
    out = subprocess.run(
        [str(ROOT / "scripts" / "tesseract.sh")], capture_output=True, text=True, check=True
    ).stdout
    path = out.strip()
    assert out.count("\n") == 1 and os.access(path, os.X_OK)
    langs = subprocess.run([path, "--list-langs"], capture_output=True, text=True, check=True)
    assert "eng" in langs.stdout.split()
