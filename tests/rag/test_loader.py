from __future__ import annotations

import pytest

from bench.workloads.hostile_requests import image_bomb_pdf
from rag.errors import DocumentError
from rag.loader import load, paged
from rag.parse_limits import ParseLimits
from tests.rag.docx_files import corrupt_docx, empty_docx, make_docx
from tests.rag.pdfs import make_pdf
from tests.rag.scans import encoded, pdf_of, scanned_page

LIMIT = 1 << 20


def test_text_and_markdown_are_kept_as_written():
    doc = load("a.txt", "\ufeffhello\n\nworld".encode(), LIMIT)
    assert (doc.text, doc.kind, doc.page_at(3)) == ("hello\n\nworld", "text", None)
    assert load("b.md", b"# Title\n\nbody", LIMIT).kind == "markdown"


def test_html_gives_its_text_only():
    html = b"<html><head><title>t</title><style>p{}</style></head><body><p>One &amp; two</p>"
    html += b"<script>var x = 1;</script><div>three</div></body></html>"
    assert load("page.html", html, LIMIT).text == "One & two\n\nthree"


def test_pdf_keeps_page_numbers():
    doc = load("r.pdf", make_pdf(["First page about cats.", "Second page about volcanoes."]), LIMIT)
    at = doc.text.index("volcanoes")
    assert doc.kind == "pdf"
    assert doc.page_at(at) == 2
    assert doc.page_at(doc.text.index("cats")) == 1


def test_docx_is_read_as_markdown():
    doc = load("notes.docx", make_docx("Bread", ["Sourdough rises slowly."]), LIMIT)
    assert (doc.kind, doc.text.splitlines()[0]) == ("docx", "# Bread")


@pytest.mark.parametrize(
    ("name", "content_type"),
    [("main.py", None), ("lib.rs", None), ("config.yaml", None), ("notes", "text/x-anything")],
)
def test_source_code_and_any_text_type_are_plain_text(name: str, content_type: str | None):
    doc = load(name, b"def f():\n    return 1\n", LIMIT, content_type)
    assert (doc.kind, doc.text) == ("text", "def f():\n    return 1\n")


def test_unsupported_types_name_the_accepted_ones():
    with pytest.raises(DocumentError, match=r"\.docx, source code, .* or an image of a page"):
        load("clip.mp4", b"\x00\x00\x00\x18ftypmp42", LIMIT, "video/mp4")


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("empty.txt", b"  \n", "empty"),
        ("junk.pdf", b"this is not a pdf at all", "not a readable PDF"),
        ("tool.exe", b"MZ...", "unsupported file type"),
        ("latin.txt", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("bin.txt", b"a\x00b", "binary"),
        ("blank.pdf", make_pdf([""]), "no extractable text"),
        ("cut.docx", corrupt_docx(), "not a readable DOCX file"),
        ("empty.docx", empty_docx(), "has no text"),
    ],
)
def test_bad_files_are_refused_with_the_reason(name: str, data: bytes, reason: str):
    with pytest.raises(DocumentError, match=reason):
        load(name, data, LIMIT)


def test_oversized_files_are_refused():
    with pytest.raises(DocumentError) as e:
        load("big.txt", b"x" * 101, 100)
    assert e.value.too_large


def test_a_pdf_of_more_pages_than_the_limit_is_refused_before_any_page_is_read():
    data = make_pdf([f"Page {i}." for i in range(5)])
    assert len(load("p.pdf", data, LIMIT, limits=ParseLimits(max_pages=5)).page_starts) == 5
    with pytest.raises(
        DocumentError, match=r"has 5 pages; the limit is 4 \(--doc-max-pages\)"
    ) as e:
        load("p.pdf", data, LIMIT, limits=ParseLimits(max_pages=4))
    assert e.value.too_large


def test_reading_a_pdf_stops_at_the_deadline():
    data = make_pdf(["One.", "Two."])
    with pytest.raises(DocumentError, match=r"longer than 0 s .*reading page 1 of 2") as e:
        load("p.pdf", data, LIMIT, limits=ParseLimits(timeout=0.0))
    assert e.value.too_large


def test_a_docx_is_read_within_its_unpacked_limit():
    data = make_docx("Bread", ["Sourdough rises slowly."])
    assert load("n.docx", data, LIMIT, limits=ParseLimits(max_unpacked_bytes=1 << 20)).text
    with pytest.raises(DocumentError, match="--doc-max-unpacked-bytes"):
        load("n.docx", data, LIMIT, limits=ParseLimits(max_unpacked_bytes=1000))


OCR = ParseLimits(ocr_max_pages=3)
SCAN = scanned_page("A scanned page about lighthouses.")


def test_a_scanned_pdf_leaves_its_pages_to_ocr():
    doc = load("s.pdf", pdf_of([SCAN, SCAN]), 1 << 24, limits=OCR)
    assert (doc.kind, doc.text, doc.ocr_pages, doc.pages()) == ("pdf", "", [1, 2], ["", ""])


def test_a_mixed_pdf_keeps_its_text_layer_and_leaves_the_rest_to_ocr():
    doc = load("m.pdf", pdf_of(["Rivers run to the sea.", SCAN, "12"]), 1 << 24, limits=OCR)
    assert doc.ocr_pages == [2, 3]  # "12": a page number stamped on a scan is no text layer
    assert doc.pages() == ["Rivers run to the sea.", "", ""]
    assert doc.page_at(doc.text.index("sea")) == 1


def test_an_image_is_one_page_left_to_ocr():
    doc = load("page.png", encoded(SCAN), 1 << 24, "image/png", OCR)
    assert (doc.kind, doc.text, doc.page_starts, doc.ocr_pages) == ("image", "", [0], [1])
    assert load("page", encoded(SCAN, "JPEG"), 1 << 24, "image/jpeg", OCR).kind == "image"


def test_more_pages_to_ocr_than_the_limit_are_refused_as_too_large():
    with pytest.raises(DocumentError, match="4 pages without text .* limit is 3") as e:
        load("s.pdf", pdf_of([SCAN] * 4), 1 << 24, limits=OCR)
    assert e.value.too_large


def test_without_ocr_a_scan_and_an_image_are_refused_with_the_reason_and_a_mixed_pdf_loads():
    off = ParseLimits(no_ocr="OCR is off on this server (--ocr off)")
    with pytest.raises(DocumentError, match=r"no extractable text .*--ocr off"):
        load("s.pdf", pdf_of([SCAN]), 1 << 24, limits=off)
    with pytest.raises(DocumentError, match=r"images of pages are read by OCR: .*--ocr off"):
        load("p.png", encoded(SCAN), 1 << 24, limits=off)
    doc = load("m.pdf", pdf_of(["Rivers run to the sea.", SCAN]), 1 << 24, limits=off)
    assert (doc.text.strip(), doc.ocr_pages) == ("Rivers run to the sea.", [])


def test_paged_is_the_inverse_of_pages():
    doc = paged(["", "two", "", "four"], "pdf")
    assert doc.pages() == ["", "two", "", "four"]
    assert [doc.page_at(doc.text.index(w)) for w in ("two", "four")] == [2, 4]


def test_a_scan_whose_image_decodes_to_gigapixels_is_refused_before_it_is_stored():
    with pytest.raises(DocumentError, match="--ocr-max-pixels") as e:
        load("bomb.pdf", image_bomb_pdf(20_000).file[1], 1 << 24, limits=OCR)
    assert not e.value.too_large  # a bad document: 400
