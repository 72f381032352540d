"""`python -m app docs ingest` through a real process: the packaged models, SQLite, index files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.db.document_store import DocumentStore
from app.db.store import Store
from bench.server_process import ROOT


def test_ingest_from_the_command_line(tmp_path: Path):
    (tmp_path / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n\nThey fly silently.")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "docs",
            "ingest",
            str(tmp_path / "owls.md"),
            str(tmp_path / "missing.txt"),
            "--collection",
            "birds",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1, out.stderr  # the missing file is reported, the rest ingested
    assert "missing.txt" in out.stderr and "collection birds" in out.stdout
    store = Store(f"sqlite:///{tmp_path / 'data' / 'kvchat.db'}")
    docs = DocumentStore(store)
    [collection] = docs.list_collections("")
    [doc] = docs.list_documents("", collection.id)
    assert (doc.filename, doc.status, doc.chunks_total) == ("owls.md", "ready", 1)
    assert docs.chunks("", doc.id)[0].text.startswith("# Owls")
    assert (tmp_path / "data" / "indexes" / f"{collection.id}.faiss").exists()
    store.close()
