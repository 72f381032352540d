"""Scanned documents through a real server: PDFs of scanned pages, mixed PDFs and photographed
pages read by OCR (Debian's tesseract) in the ingestion worker, answered with citations that
name the page; the pages OCR read and those it could not are in GET /v1/documents/{id}.

The pages are rendered from text on the spot and degraded (skew, noise, blur, JPEG artifacts:
tests/rag/scans.py). Assertions are on words found, never on OCR's exact output.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.lib.server_process import ServerProcess
from tests.app.api.kvchat.test_document_routes import (
    ask,
    call,
    new_collection,
    upload,
    wait_ready,
)
from tests.rag.scans import PHOTO, encoded, pdf_of, scanned_page

ARGS = ["-np", "2", "-c", "4096", "--doc-prefill-tokens", "0"]
LIGHTHOUSE = (
    "The lighthouse of Alexandria stood on the island of Pharos. Its fire was seen by ships "
    "far out at sea, and it guided sailors into the harbour for many centuries."
)
CAUSEWAY = (
    "Basalt columns at the Giant's Causeway formed when a thick flow of lava cooled slowly "
    "and cracked into hexagons. About forty thousand columns stand on the coast of Antrim."
)
HARBOUR = (
    "The harbour master of Valletta writes down every ship that enters the Grand Harbour, "
    "with its flag, its cargo and the hour of its arrival."
)
SALT = (
    "Salt was carried across the Sahara by camel caravans to Timbuktu, where merchants "
    "traded it for gold that came up the river from the south."
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    with ServerProcess(*ARGS, "--data-dir", str(data)) as srv:
        yield srv


def ingested(server: ServerProcess, col: str, name: str, data: bytes, mime: str) -> dict:
    r = upload(server, col, name, data, mime)
    assert r.status_code == 202, r.text
    doc = wait_ready(server, r.json()["id"])
    assert doc["status"] == "ready", doc
    return doc


def chunks_by_page(server: ServerProcess, doc_id: str) -> dict[int, str]:
    chunks = call(server, "GET", f"/v1/documents/{doc_id}/chunks").json()["data"]
    pages: dict[int, str] = {}
    for c in chunks:
        pages[c["page"]] = pages.get(c["page"], "") + " " + c["text"]
    return pages


def words_in(text: str, *words: str) -> bool:
    return all(w.lower() in text.lower() for w in words)


def test_a_scanned_pdf_is_read_by_ocr_and_answers_cite_the_page(server: ServerProcess):
    col = new_collection(server, "scans")
    pdf = pdf_of([scanned_page(LIGHTHOUSE, seed=1), scanned_page(CAUSEWAY, seed=2)])
    doc = ingested(server, col, "scanned.pdf", pdf, "application/pdf")
    assert doc["ocr_pages"] == [1, 2] and doc["ocr_failed"] == [], doc
    assert doc["progress"]["ocr_pages_done"] == doc["progress"]["ocr_pages_total"] == 2
    pages = chunks_by_page(server, doc["id"])
    assert words_in(pages[1], "lighthouse", "Alexandria", "Pharos"), pages
    assert words_in(pages[2], "basalt", "Causeway", "hexagons"), pages

    question = "How did the basalt columns of the Giant's Causeway form?"
    (cited,) = ask(server, col, question, top_k=1, max_tokens=8)["citations"]
    assert (cited["document_id"], cited["filename"], cited["page"]) == (doc["id"], "scanned.pdf", 2)
    assert words_in(cited["text"], "basalt", "lava")


def test_a_mixed_pdf_takes_the_text_layer_where_a_page_has_one(server: ServerProcess):
    col = new_collection(server, "mixed")
    pdf = pdf_of([SALT, scanned_page(CAUSEWAY, seed=3)])
    doc = ingested(server, col, "mixed.pdf", pdf, "application/pdf")
    assert doc["ocr_pages"] == [2] and doc["ocr_failed"] == [], doc
    pages = chunks_by_page(server, doc["id"])
    assert " ".join(pages[1].split()) == SALT  # the text layer, word for word
    assert words_in(pages[2], "Causeway", "Antrim")
    r = call(
        server,
        "POST",
        f"/v1/collections/{col}/search",
        json={"query": "Where do the basalt columns of the Causeway stand?", "top_k": 1},
    )
    (hit,) = r.json()["data"]
    assert hit["page"] == 2 and words_in(hit["text"], "basalt")


@pytest.mark.parametrize(
    ("name", "fmt", "mime"),
    [("harbour.jpg", "JPEG", "image/jpeg"), ("harbour.png", "PNG", "image/png")],
)
def test_a_photographed_page_is_read_as_page_one(
    server: ServerProcess, name: str, fmt: str, mime: str
):
    col = new_collection(server, f"photo-{fmt}")
    photo = encoded(scanned_page(HARBOUR, PHOTO, seed=4), fmt)
    doc = ingested(server, col, name, photo, mime)
    assert doc["ocr_pages"] == [1] and doc["ocr_failed"] == [], doc
    question = "Who writes down the ships entering the Grand Harbour?"
    (cited,) = ask(server, col, question, top_k=1, max_tokens=8)["citations"]
    assert (cited["filename"], cited["page"]) == (name, 1)
    assert words_in(cited["text"], "harbour master", "Valletta")


def test_a_page_ocr_cannot_read_is_reported_and_the_rest_is_ingested(tmp_path):
    """Each page's OCR may take 1 ms here: no page is read, each says why; a document with a
    text layer elsewhere is ready with it, one of scans only ends in `error` naming the pages."""
    args = [*ARGS, "--data-dir", str(tmp_path), "--ocr-page-timeout", "0.001"]
    with ServerProcess(*args) as server:
        col = new_collection(server, "failing")
        mixed = ingested(
            server, col, "m.pdf", pdf_of([SALT, scanned_page(CAUSEWAY)]), "application/pdf"
        )
        assert mixed["ocr_pages"] == []
        (failed,) = mixed["ocr_failed"]
        assert failed["page"] == 2 and "--ocr-page-timeout" in failed["reason"], failed
        assert set(chunks_by_page(server, mixed["id"])) == {1}

        r = upload(server, col, "s.pdf", pdf_of([scanned_page(LIGHTHOUSE)]), "application/pdf")
        assert r.status_code == 202, r.text
        scan = wait_ready(server, r.json()["id"])
        assert scan["status"] == "error" and "page 1" in scan["error"], scan
        assert "--ocr-page-timeout" in scan["error"] and scan["ocr_failed"][0]["page"] == 1


def test_without_ocr_scans_and_images_are_refused_with_the_reason(tmp_path):
    with ServerProcess(*ARGS, "--data-dir", str(tmp_path), "--ocr", "off") as server:
        col = new_collection(server, "no-ocr")
        for name, data, mime in (
            ("s.pdf", pdf_of([scanned_page(LIGHTHOUSE)]), "application/pdf"),
            ("p.png", encoded(scanned_page(HARBOUR)), "image/png"),
        ):
            r = upload(server, col, name, data, mime)
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert error["param"] == "file" and "--ocr off" in error["message"], error
        # A mixed PDF keeps its text pages; the scanned one is left out, as before OCR.
        doc = ingested(
            server, col, "m.pdf", pdf_of([SALT, scanned_page(CAUSEWAY)]), "application/pdf"
        )
        assert doc["ocr_pages"] == [] and doc["ocr_failed"] == []
        assert set(chunks_by_page(server, doc["id"])) == {1}
