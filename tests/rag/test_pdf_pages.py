from __future__ import annotations

import pytest
from fpdf import FPDF

from bench.workloads.hostile_requests import image_bomb_pdf
from rag.errors import DocumentError
from rag.parse_limits import Deadline
from rag.pdf_pages import PdfRenderer, image_pixels, page_texts
from tests.rag.pdfs import make_pdf
from tests.rag.scans import pdf_of, scanned_page


def test_each_page_s_text_layer_in_order_and_none_for_a_scan():
    pdf = pdf_of(["Page one speaks of rivers.", scanned_page("A scan."), "Page three."])
    texts = page_texts(pdf, None, Deadline(None))
    assert [t.strip() for t in texts] == ["Page one speaks of rivers.", "", "Page three."]


def test_more_pages_than_the_limit_are_refused_before_any_is_read():
    with pytest.raises(DocumentError, match="--doc-max-pages") as e:
        page_texts(make_pdf(["a", "b", "c"]), 2, Deadline(None))
    assert e.value.too_large


def test_a_page_renders_at_the_dpi_asked_for():
    with PdfRenderer(make_pdf(["Some text."])) as pdf:
        assert pdf.n_pages == 1
        image, dpi = pdf.render(1, 150, 50_000_000, 50_000_000)
    assert dpi == 150 and image.mode == "L"
    assert image.size == pytest.approx((round(8.27 * 150), round(11.69 * 150)), abs=2)


def test_a_page_claiming_a_huge_size_renders_within_the_pixel_budget():
    pdf = FPDF(format=(14_000, 14_000))  # mm: a page of 550 x 550 inches
    pdf.add_page()
    with PdfRenderer(bytes(pdf.output())) as renderer:
        image, dpi = renderer.render(1, 300, 4_000_000, 50_000_000)
    assert image.width * image.height <= 4_000_000 * 1.01 and dpi < 300


def test_the_pixels_of_a_page_s_images_are_counted_before_any_is_decoded():
    bomb = image_bomb_pdf(20_000).file[1]
    assert image_pixels(bomb, [1], Deadline(None)) == {1: 400_000_000}
    scan = pdf_of([scanned_page("A scan.")])
    (pixels,) = image_pixels(scan, [1], Deadline(None)).values()
    assert 1_000_000 < pixels < 5_000_000  # the 200-dpi scan, whatever size it is drawn at


def test_a_page_whose_images_decode_past_the_limit_is_not_rendered():
    refused = pytest.raises(DocumentError, match="page 1 have 400000000 pixels.*--ocr-max-pixels")
    with PdfRenderer(image_bomb_pdf(20_000).file[1]) as pdf, refused:
        pdf.render(1, 300, 12_000_000, 50_000_000)
