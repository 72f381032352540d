"""`python -m app docs ingest` and `reembed` through real processes: the packaged models, SQLite,
index files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from bench.lib.server_process import ROOT, ServerProcess
from tests.app.api.kvchat.test_document_routes import call
from tests.rag.scans import encoded, scanned_page


def docs_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", "docs", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ingest_from_the_command_line(tmp_path: Path):
    (tmp_path / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n\nThey fly silently.")
    out = docs_command(
        "ingest",
        str(tmp_path / "owls.md"),
        str(tmp_path / "missing.txt"),
        "--collection",
        "birds",
        "--data-dir",
        str(tmp_path / "data"),
    )
    assert out.returncode == 1, out.stderr  # the missing file is reported, the rest ingested
    assert "missing.txt" in out.stderr and "collection birds" in out.stdout
    store = Store(f"sqlite:///{tmp_path / 'data' / 'kvchat.db'}")
    docs = DocumentStore(store)
    [collection] = docs.list_collections("")
    [doc] = docs.list_documents("", collection.id)
    assert (doc.filename, doc.status, doc.chunks_total) == ("owls.md", "ready", 1)
    assert docs.chunks("", doc.id)[0].text.startswith("# Owls")
    assert len(list((tmp_path / "data" / "indexes").glob(f"{collection.id}.*faiss"))) == 1
    store.close()


def test_ingest_reads_scans_and_photos_by_ocr(tmp_path: Path):
    (tmp_path / "owls.png").write_bytes(encoded(scanned_page("Barn owls hunt mice at night.")))
    out = docs_command(
        "ingest", str(tmp_path / "owls.png"), "--collection", "scans",
        "--data-dir", str(tmp_path / "data"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    store = Store(f"sqlite:///{tmp_path / 'data' / 'kvchat.db'}")
    docs = DocumentStore(store)
    [collection] = docs.list_collections("")
    [doc] = docs.list_documents("", collection.id)
    assert (doc.kind, doc.status, doc.ocr.pages) == ("image", "ready", [1])
    [chunk] = docs.chunks("", doc.id)
    assert chunk.page == 1 and "owls" in chunk.text and "night" in chunk.text
    store.close()


@pytest.mark.slow
def test_reembed_moves_a_collection_to_this_backend_while_a_server_runs(tmp_path: Path):
    """A collection embedded by `torch` (as before the onnx-int8 default) is refused by a
    server on the default backend until `docs reembed` makes its vectors again; the running
    server then serves it without a restart, and so does the next one."""
    data = str(tmp_path / "data")
    (tmp_path / "owls.md").write_text("# Owls\n\nOwls hunt mice at night and fly silently.")
    (tmp_path / "tea.md").write_text("# Tea\n\nGreen tea leaves are steamed after picking.")
    paths = [str(tmp_path / "owls.md"), str(tmp_path / "tea.md")]
    made = docs_command("ingest", *paths, "--collection", "old", "--data-dir", data,
                        "--embedding-backend", "torch")  # fmt: skip
    assert made.returncode == 0, made.stderr
    store = Store(f"sqlite:///{tmp_path / 'data' / 'kvchat.db'}")
    [collection] = DocumentStore(store).list_collections("")
    assert ChunkStore(store).backend_of(collection.id) == "torch"

    def search(server: ServerProcess) -> httpx.Response:
        body = {"query": "What do owls hunt?", "top_k": 1}
        return call(server, "POST", f"/v1/collections/{collection.id}/search", json=body)

    with ServerProcess("--data-dir", data) as server:
        refused = search(server)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "embedding_backend_mismatch"
        # Another replica's index files (its own data directory), made before the re-embedding.
        shutil.copytree(tmp_path / "data" / "indexes", tmp_path / "other" / "indexes")
        missing = docs_command("reembed", "--collection", "nope", "--data-dir", data)
        assert missing.returncode == 1 and "no collection 'nope'" in missing.stderr
        done = docs_command("reembed", "--collection", "old", "--data-dir", data)
        assert done.returncode == 0, done.stderr
        assert "2 chunks embedded with onnx-int8" in done.stdout
        found = search(server)
        assert found.status_code == 200, found.text
        hit = found.json()["data"][0]
        assert hit["filename"] == "owls.md"
    assert ChunkStore(store).backend_of(collection.id) == "onnx-int8"
    database = f"sqlite:///{tmp_path / 'data' / 'kvchat.db'}"

    def top_hit(data_dir: Path) -> dict:
        with ServerProcess("--data-dir", str(data_dir), "--database-url", database) as server:
            return search(server).json()["data"][0]

    truth = top_hit(tmp_path / "clean")  # no index file: built from the stored vectors
    other = top_hit(tmp_path / "other")
    # Neither the running server's index from before nor the other replica's file of torch's
    # vectors was kept (either would score the query differently).
    assert truth["filename"] == "owls.md"
    assert hit["score"] == pytest.approx(truth["score"])
    assert other["score"] == pytest.approx(truth["score"])
    store.close()
