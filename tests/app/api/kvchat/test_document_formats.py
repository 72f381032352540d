"""Document formats through a real server: DOCX, source code and text/* uploads ingested and
searched; corrupt DOCX and PDF files refused with a 400 (nothing stored, nothing left `processing`);
other types refused naming the accepted ones; a collection embedded by one backend refused
(409) by a server of another, across a restart on the same data directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.lib.server_process import ServerProcess
from tests.app.api.kvchat.test_document_routes import (
    call,
    new_collection,
    upload,
    wait_ready,
)
from tests.rag.docx_files import corrupt_docx, make_docx
from tests.rag.pdfs import make_pdf

ARGS = ["-np", "2", "-c", "4096", "--doc-prefill-tokens", "0"]
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    with ServerProcess(*ARGS, "--data-dir", str(data)) as srv:
        yield srv


def search(server: ServerProcess, col: str, query: str) -> list[dict]:
    r = call(server, "POST", f"/v1/collections/{col}/search", json={"query": query, "top_k": 1})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_a_docx_is_ingested_with_its_headings_paragraphs_and_tables(server: ServerProcess):
    col = new_collection(server, "word")
    data = make_docx(
        "Glaciers",
        ["The Aletsch glacier is the largest glacier in the Alps.", "It flows south."],
        [["glacier", "length"], ["Aletsch", "23 km"]],
    )
    r = upload(server, col, "glaciers.docx", data, DOCX_MIME)
    assert r.status_code == 202, r.text
    doc = wait_ready(server, r.json()["id"])
    assert doc["status"] == "ready", doc
    chunks = call(server, "GET", f"/v1/documents/{doc['id']}/chunks").json()["data"]
    text = "\n\n".join(c["text"] for c in chunks)
    assert "# Glaciers" in text and "Aletsch | 23 km" in text and "It flows south." in text
    hit = search(server, col, "Which is the largest glacier in the Alps?")[0]
    assert hit["document_id"] == doc["id"] and "Aletsch" in hit["text"]
    collection = call(server, "GET", f"/v1/collections/{col}").json()
    assert collection["embedding_backend"] == "onnx-int8"  # the default made its vectors


@pytest.mark.parametrize(
    ("name", "mime"), [("walk.py", "text/x-python"), ("notes.log", None), ("raw", "text/x-weird")]
)
def test_source_code_and_any_text_type_are_ingested_as_text(
    server: ServerProcess, name: str, mime: str | None
):
    col = new_collection(server, f"code-{name}")
    source = b"def walk(tree):\n    # Visit every node of the tree depth first.\n    return tree\n"
    r = call(
        server,
        "POST",
        f"/v1/collections/{col}/documents",
        files={"file": (name, source, mime) if mime else (name, source)},
    )
    assert r.status_code == 202, r.text
    doc = wait_ready(server, r.json()["id"])
    assert doc["status"] == "ready" and doc["n_chunks"] == 1, doc


@pytest.mark.parametrize(
    ("name", "data", "mime", "words"),
    [
        ("cut.docx", corrupt_docx(), DOCX_MIME, "not a readable DOCX file"),
        ("fake.docx", b"just some words", DOCX_MIME, "not a readable DOCX file"),
        ("cut.pdf", make_pdf(["A page about owls."])[:200], "application/pdf", "PDF"),
        ("photo.jpg", b"\xff\xd8\xff\xe0 not text", "image/jpeg", "corrupt or truncated"),
        ("clip.mp4", b"\x00\x00\x00\x18ftypmp42", "video/mp4", ".docx, source code"),
    ],
)
def test_corrupt_and_unsupported_files_get_a_400_and_nothing_is_stored(
    server: ServerProcess, name: str, data: bytes, mime: str, words: str
):
    col = new_collection(server, f"bad-{name}")
    r = upload(server, col, name, data, mime)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "file" and error["code"] == "invalid_document"
    assert words in error["message"]
    listed = call(server, "GET", f"/v1/collections/{col}/documents").json()["data"]
    assert listed == []  # nothing stored: no document left queued or processing


@pytest.mark.slow
def test_a_server_of_another_backend_refuses_the_collection(tmp_path: Path):
    data = str(tmp_path / "data")
    with ServerProcess(*ARGS, "--data-dir", data, "--embedding-backend", "torch") as torch_server:
        col = new_collection(torch_server, "fp32")
        r = upload(torch_server, col, "owls.txt", b"Owls hunt at night.", "text/plain")
        assert wait_ready(torch_server, r.json()["id"])["status"] == "ready"
        assert call(torch_server, "GET", f"/v1/collections/{col}").json()["embedding_backend"] == (
            "torch"
        )
    with ServerProcess(*ARGS, "--data-dir", data) as onnx_server:  # the default: onnx-int8
        for method, path, kw in (
            ("POST", f"/v1/collections/{col}/search", {"json": {"query": "owls"}}),
            ("POST", f"/v1/collections/{col}/ask", {"json": {"question": "owls?"}}),
            (
                "POST",
                f"/v1/collections/{col}/documents",
                {"files": {"file": ("more.txt", b"Owls have soft feathers.", "text/plain")}},
            ),
        ):
            r = call(onnx_server, method, path, **kw)
            assert r.status_code == 409, (path, r.text)
            error = r.json()["error"]
            assert error["code"] == "embedding_backend_mismatch"
            assert "'torch'" in error["message"] and "'onnx-int8'" in error["message"]
        listed = call(onnx_server, "GET", f"/v1/collections/{col}/documents").json()["data"]
        assert [d["filename"] for d in listed] == ["owls.txt"]  # nothing added
        fresh = new_collection(onnx_server, "int8")  # a new collection takes this backend
        r = upload(onnx_server, fresh, "owls.txt", b"Owls hunt at night.", "text/plain")
        assert wait_ready(onnx_server, r.json()["id"])["status"] == "ready"
        assert search(onnx_server, fresh, "night hunters")[0]["text"] == "Owls hunt at night."
