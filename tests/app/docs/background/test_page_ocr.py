"""The OCR step of ingestion at unit level: a real SQLite store, the rig of test_ingestor.py and
a fake OCR engine (the real one, through the server: tests/app/api/kvchat/test_ocr_documents.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from app.db.documents.document_records import OcrState
from app.docs.background.ingestor import ingest_document
from app.docs.background.page_ocr import no_text
from app.docs.ocr_setup import OcrSetup
from rag.errors import OcrError
from rag.ocr.ocr_reader import OcrOptions, PageFailure
from tests.app.docs.background.test_ingestor import MODEL, Rig
from tests.rag.scans import pdf_of

SCAN = Image.new("L", (200, 280), 255)


class Engine:
    """Reads the n-th page it is given as "Words read from scan n."; `fail` pages raise."""

    def __init__(self, fail: tuple[int, ...] = ()) -> None:
        self.fail, self.calls = fail, 0

    def read(self, image: Image.Image, timeout: float, dpi: int | None = None) -> str:
        self.calls += 1
        if self.calls in self.fail:
            raise OcrError("tesseract failed: a smudge")
        return f"Words read from scan {self.calls}."


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.store.close()


def add_pdf(rig: Rig, pages: list[str | Image.Image]) -> str:
    data = pdf_of(pages)
    texts = ["" if isinstance(p, Image.Image) else p for p in pages]
    text, starts = "", []
    for t in texts:
        text += "\n\n" if text else ""
        starts.append(len(text))
        text += t
    scanned = [i + 1 for i, p in enumerate(pages) if isinstance(p, Image.Image)]
    record, _ = rig.docs.add_document(
        "", rig.collection.id, filename="m.pdf", kind="pdf",
        sha256=hashlib.sha256(data).hexdigest(), text=text, page_starts=starts, metadata={},
        ocr_pages=scanned, source=data,
    )  # fmt: skip
    return record.id


def ingest(rig: Rig, doc: str, setup: OcrSetup | None, quiet: list[int] | None = None):
    return ingest_document(
        rig.chunks, rig.library, rig.tokenize, MODEL, doc,
        wait_for_quiet=(lambda: quiet.append(1)) if quiet is not None else (lambda: None),
        ocr=setup,
    )  # fmt: skip


def test_read_pages_go_into_the_text_in_page_order_and_chunks_name_their_page(rig: Rig):
    doc = add_pdf(rig, ["The text layer of page one.", SCAN, "Page three has text.", SCAN])
    quiet: list[int] = []
    assert ingest(rig, doc, OcrSetup(OcrOptions(Engine())), quiet) is not None
    record = rig.docs.get_document("", doc)
    assert record.status == "ready" and record.ocr == OcrState([], [2, 4], [], 2)
    pages = {c.page: c.text for c in rig.docs.chunks("", doc, MODEL)}
    assert pages == {
        1: "The text layer of page one.",
        2: "Words read from scan 1.",
        3: "Page three has text.",
        4: "Words read from scan 2.",
    }
    assert len(quiet) >= 2  # the worker waited for quiet before each page
    assert rig.chunks.ocr.source(doc) is None


def test_a_page_that_fails_is_reported_and_the_document_is_ready_with_the_rest(rig: Rig):
    doc = add_pdf(rig, [SCAN, SCAN])
    assert ingest(rig, doc, OcrSetup(OcrOptions(Engine(fail=(1,))))) is not None
    record = rig.docs.get_document("", doc)
    assert record.status == "ready"
    assert record.ocr == OcrState([], [2], [PageFailure(1, "tesseract failed: a smudge")], 2)
    assert [c.page for c in rig.docs.chunks("", doc, MODEL)] == [2]


def test_a_server_without_ocr_reports_each_page_it_cannot_read(rig: Rig):
    mixed = add_pdf(rig, ["Page one has text.", SCAN])
    setup = OcrSetup(None, "OCR is off on this server (--ocr off)")
    assert ingest(rig, mixed, setup) is not None
    record = rig.docs.get_document("", mixed)
    reason = "not read: OCR is off on this server (--ocr off)"
    assert record.status == "ready" and record.ocr.failed == [PageFailure(2, reason)]

    scans = add_pdf(rig, [SCAN])
    with pytest.raises(ValueError, match=r"no text to index: page 1: not read: OCR is off"):
        ingest(rig, scans, setup)


def test_a_document_deleted_while_its_pages_are_read_stops_there(rig: Rig):
    doc = add_pdf(rig, [SCAN, SCAN])
    engine = Engine()

    class Deleting(Engine):
        def read(self, image: Image.Image, timeout: float, dpi: int | None = None) -> str:
            rig.docs.delete_document("", doc)
            return engine.read(image, timeout, dpi)

    assert ingest(rig, doc, OcrSetup(OcrOptions(Deleting()))) is None
    assert engine.calls == 1  # the next page's progress found it gone


def test_why_a_document_has_no_text():
    assert no_text(None) == "the document has no text to index"
    blank = OcrState([], [1, 2], [], 2)
    assert no_text(blank) == "no text to index: OCR found no text on page(s) 1, 2"
    failed = OcrState([], [], [PageFailure(i, "too slow") for i in range(1, 8)], 7)
    assert no_text(failed).endswith("page 5: too slow (and 2 more pages)")
