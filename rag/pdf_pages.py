"""A PDF's pages through PDFium (pypdfium2): each page's text layer, the pixels of the images
on a page, and a page rendered as an image for OCR.

PDFium is not thread-safe: every call into it, in this process, holds `PDFIUM`. Reading the
text layer holds it for the whole document (an upload, bounded by its page count and
deadline); rendering for OCR holds it for one page at a time, so uploads are not held up by a
long OCR run. A page is rendered within a pixel budget whatever size its media box claims (a
hostile PDF may declare pages of 200 x 200 inches), and only when the images on it decode to
at most `max_pixels` together: PDFium decodes an image whole before scaling it, so a 1 MB PDF
holding a 30000 x 30000 image of zeros would take 900 MB to render.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from PIL import Image

from rag.errors import DocumentError
from rag.parse_limits import Deadline

PDFIUM = threading.Lock()
POINTS_PER_INCH = 72
IMAGE_OBJECT = 3  # FPDF_PAGEOBJ_IMAGE


def page_texts(data: bytes, max_pages: int | None, deadline: Deadline) -> list[str]:
    """Each page's text layer ("" for a page without one), in page order."""
    import pypdfium2  # only PDF uploads pay for the import

    with PDFIUM:
        pdf = _open(pypdfium2, data)
        try:
            n = len(pdf)
            if max_pages is not None and n > max_pages:
                raise DocumentError(
                    f"the PDF has {n} pages; the limit is {max_pages} (--doc-max-pages)",
                    too_large=True,
                )
            pages = []
            for i in range(n):
                deadline.check(f"reading page {i + 1} of {n}")
                pages.append(_page_text(pdf[i]))
            return pages
        finally:
            pdf.close()


def _open(pypdfium2: Any, data: bytes) -> Any:
    try:
        return pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as e:
        raise DocumentError(f"not a readable PDF: {e}") from None


def _page_text(page: Any) -> str:
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
    finally:
        textpage.close()
        page.close()
    # PDFium ends lines with CRLF and marks a word broken at a line end with U+FFFE.
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "").replace("\x00", "")


def image_pixels(data: bytes, pages: list[int], deadline: Deadline) -> dict[int, int]:
    """The pixels of the images on each of `pages` (1-based), decoded, all added up."""
    import pypdfium2

    with PDFIUM:
        pdf = _open(pypdfium2, data)
        try:
            found = {}
            for number in pages:
                deadline.check(f"looking at the images of page {number}")
                page = pdf[number - 1]
                try:
                    found[number] = _image_pixels(page)
                finally:
                    page.close()
            return found
        finally:
            pdf.close()


def _image_pixels(page: Any) -> int:
    """Images in forms included (PDFium goes into nested forms, 15 deep)."""
    total = 0
    for image in page.get_objects(filter=[IMAGE_OBJECT]):
        width, height = image.get_px_size()
        total += max(width, 0) * max(height, 0)
    return total


def too_many_pixels(page: int, pixels: int, max_pixels: int) -> DocumentError:
    return DocumentError(
        f"the images on page {page} have {pixels} pixels; the limit is {max_pixels}"
        " (--ocr-max-pixels)"
    )


class PdfRenderer:
    """An open PDF whose pages are rendered one at a time (greyscale), each within
    `max_pixels`; close it when done (a context manager)."""

    def __init__(self, data: bytes) -> None:
        import pypdfium2

        with PDFIUM:
            self._pdf = _open(pypdfium2, data)
            self.n_pages = len(self._pdf)

    def render(
        self, page_number: int, dpi: int, max_pixels: int, max_image_pixels: int
    ) -> tuple[Image.Image, int]:
        """Page `page_number` (1-based) as an image and the dpi it was rendered at: `dpi`, or
        less where the page would exceed `max_pixels` at it; `DocumentError` where its images
        decode to more than `max_image_pixels`."""
        with PDFIUM:
            page = self._pdf[page_number - 1]
            try:
                pixels = _image_pixels(page)
                if pixels > max_image_pixels:
                    raise too_many_pixels(page_number, pixels, max_image_pixels)
                width, height = page.get_size()  # points
                scale = dpi / POINTS_PER_INCH
                pixels = max(width * scale, 1) * max(height * scale, 1)
                if pixels > max_pixels:
                    scale *= math.sqrt(max_pixels / pixels)
                bitmap = page.render(scale=scale, grayscale=True)
                try:
                    image = bitmap.to_pil()
                    image.load()
                    return image.copy(), max(1, round(scale * POINTS_PER_INCH))
                finally:
                    bitmap.close()
            finally:
                page.close()

    def close(self) -> None:
        with PDFIUM:
            self._pdf.close()

    def __enter__(self) -> PdfRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
