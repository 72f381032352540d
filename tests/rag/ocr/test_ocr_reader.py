from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from PIL import Image

from rag.errors import OcrError
from rag.ocr.ocr_reader import WORK_PIXELS, OcrOptions, PageFailure, read_pages
from rag.ocr.tesseract import Tesseract
from tests.rag.scans import PHOTO, encoded, pdf_of, scanned_page

OWLS = "Barn owls hunt at night and find mice by sound alone, even in complete darkness."
FERNS = "Ferns grew on the Earth long before flowers; they spread by spores, not by seeds."


@dataclass
class FakeEngine:
    """Reads pages as told: `fail` pages raise, the rest answer with their size."""

    fail: dict[int, OcrError] = field(default_factory=dict)
    seen: list[tuple[int, int]] = field(default_factory=list)
    timeouts: list[float] = field(default_factory=list)

    def read(self, image: Image.Image, timeout: float, dpi: int | None = None) -> str:
        self.seen.append(image.size)
        self.timeouts.append(timeout)
        page = len(self.seen)
        if page in self.fail:
            raise self.fail[page]
        return f"page {page}"


def test_the_pages_of_a_scanned_pdf_are_read_in_their_order():
    pdf = pdf_of([scanned_page(OWLS, seed=1), "A text page.", scanned_page(FERNS, seed=2)])
    result = read_pages(pdf, "pdf", [1, 3], OcrOptions(Tesseract()))
    assert result is not None and result.failed == []
    assert sorted(result.texts) == [1, 3]
    assert all(w in result.texts[1] for w in ("owls", "mice", "darkness"))
    assert all(w in result.texts[3] for w in ("Ferns", "spores", "seeds"))


def test_a_photographed_page_is_read_upright():
    photo = encoded(scanned_page(OWLS, PHOTO, seed=5), "JPEG", quality=60)
    result = read_pages(photo, "image", [1], OcrOptions(Tesseract()))
    assert result is not None and all(w in result.texts[1] for w in ("Barn owls", "night"))


def test_a_page_that_fails_is_reported_and_the_next_is_read():
    engine = FakeEngine({2: OcrError("tesseract failed: out of luck")})
    pdf = pdf_of(["a", "b", "c"])
    result = read_pages(pdf, "pdf", [1, 2, 3], OcrOptions(engine))
    assert result is not None
    assert result.texts == {1: "page 1", 3: "page 3"}
    assert result.failed == [PageFailure(2, "tesseract failed: out of luck")]


def test_a_page_over_its_time_names_the_setting():
    engine = FakeEngine({1: OcrError("OCR took longer than 5 s", timed_out=True)})
    options = OcrOptions(engine, page_timeout=5.0)
    result = read_pages(pdf_of(["a"]), "pdf", [1], options)
    assert result is not None
    assert result.failed == [PageFailure(1, "OCR took longer than 5 s (--ocr-page-timeout)")]
    assert engine.timeouts == [5.0]


def test_pages_left_when_the_document_s_time_is_up_are_reported():
    engine = FakeEngine()
    options = OcrOptions(engine, timeout=0.0)
    result = read_pages(pdf_of(["a", "b"]), "pdf", [1, 2], options)
    assert result is not None and result.texts == {} and [f.page for f in result.failed] == [1, 2]
    assert all("--ocr-timeout" in f.reason for f in result.failed)
    assert engine.seen == []


def test_a_page_is_never_given_more_than_the_document_has_left():
    engine = FakeEngine()
    options = OcrOptions(engine, page_timeout=60.0, timeout=30.0)
    read_pages(pdf_of(["a"]), "pdf", [1], options)
    assert 0 < engine.timeouts[0] <= 30.0


def test_before_page_sees_progress_and_can_stop_the_reading():
    engine = FakeEngine()
    calls: list[tuple[int, int]] = []

    def before(done: int, total: int) -> bool:
        calls.append((done, total))
        return done < 1

    result = read_pages(pdf_of(["a", "b", "c"]), "pdf", [1, 2, 3], OcrOptions(engine), before)
    assert result is None and calls == [(0, 3), (1, 3)] and len(engine.seen) == 1


@pytest.mark.parametrize("kind", ["pdf", "image"])
def test_a_page_is_read_within_the_work_pixels_whatever_its_size(kind: str):
    engine = FakeEngine()
    if kind == "pdf":
        from fpdf import FPDF

        pdf = FPDF(format=(5000, 5000))  # a page of 70 x 70 inches: 441 megapixels at 300 dpi
        pdf.add_page()
        data = bytes(pdf.output())
    else:
        data = encoded(Image.new("L", (6000, 5000), 255), "PNG")
    result = read_pages(data, kind, [1], OcrOptions(engine))
    assert result is not None and result.failed == []
    ((width, height),) = engine.seen
    assert width * height <= WORK_PIXELS * 1.01
