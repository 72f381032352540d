"""`read_pages`: the pages of an upload that have no text layer, read by OCR one at a time.

Each page is rendered (a PDF's, at `OcrOptions.dpi`) or decoded (an image's), brought within
`WORK_PIXELS` (more pixels than a 300-dpi A4 page read no better and take longer), made level
(rag/ocr/deskew.py) and read by the engine within the page's time: `page_timeout`, or what is
left of the document's `timeout` if less. A page that fails (the engine failed or ran out of
time, the page would not render) is reported with its reason and the next page goes on; pages
not reached before the document's time ran out are reported too. Nothing is dropped silently.

`before_page(done, total)` runs before each page: the caller waits there for its turn on the
cores and records progress; it returns False to stop (the document was deleted meanwhile).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from PIL import Image

from rag.errors import DocumentError, OcrError
from rag.ocr.deskew import deskew
from rag.ocr.page_images import page_image
from rag.pdf_pages import PdfRenderer

log = logging.getLogger(__name__)

WORK_PIXELS = 12_000_000  # a page larger than this is scaled down before it is read
BeforePage = Callable[[int, int], bool]


class PageReader(Protocol):
    """An OCR engine (rag/ocr/tesseract.py `Tesseract`): one page image -> its text, or
    `OcrError` if it failed or took longer than `timeout` seconds."""

    def read(self, image: Image.Image, timeout: float, dpi: int | None = None) -> str: ...


@dataclass(slots=True, frozen=True)
class OcrOptions:
    engine: PageReader
    dpi: int = 300  # a PDF page's rendering
    page_timeout: float = 60.0  # seconds one page may take
    timeout: float = 600.0  # seconds all pages of one document may take
    # An image page's width x height, a PDF page's images' together (checked at upload too).
    max_pixels: int = 50_000_000


@dataclass(slots=True)
class PageFailure:
    page: int  # 1-based
    reason: str


@dataclass(slots=True)
class OcrResult:
    texts: dict[int, str] = field(default_factory=dict)  # page -> its text (maybe "": blank)
    failed: list[PageFailure] = field(default_factory=list)


def read_pages(
    source: bytes,
    kind: str,
    pages: list[int],
    options: OcrOptions,
    before_page: BeforePage = lambda done, total: True,
) -> OcrResult | None:
    """The text of each of `pages` (1-based) of `source`, a PDF or an image upload (`kind`
    "pdf" or "image"); None if `before_page` said to stop."""
    result = OcrResult()
    end = time.monotonic() + options.timeout
    renderer = PdfRenderer(source) if kind == "pdf" else None
    try:
        for i, page in enumerate(pages):
            if not before_page(i, len(pages)):
                return None
            left = end - time.monotonic()
            if left <= 0:
                reason = f"not read: OCR of the document took longer than {options.timeout:g} s"
                result.failed += [PageFailure(p, reason + " (--ocr-timeout)") for p in pages[i:]]
                break
            try:
                result.texts[page] = _read(source, renderer, page, options, left)
            except Exception as e:  # this page only: the document goes on with the others
                if not isinstance(e, OcrError | DocumentError):
                    log.warning("OCR of page %d failed", page, exc_info=True)
                result.failed.append(PageFailure(page, _reason(e, options, left)))
        return result
    finally:
        if renderer is not None:
            renderer.close()


def _read(
    source: bytes, renderer: PdfRenderer | None, page: int, options: OcrOptions, left: float
) -> str:
    if renderer is not None:
        image, dpi = renderer.render(page, options.dpi, WORK_PIXELS, options.max_pixels)
    else:
        image = page_image(source, page, options.max_pixels)
        image, dpi = _within(image, WORK_PIXELS), None
    return options.engine.read(deskew(image), min(options.page_timeout, left), dpi)


def _within(image: Image.Image, max_pixels: int) -> Image.Image:
    pixels = image.width * image.height
    if pixels <= max_pixels:
        return image
    scale = math.sqrt(max_pixels / pixels)
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def _reason(error: Exception, options: OcrOptions, left: float) -> str:
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    if isinstance(error, OcrError) and error.timed_out:
        limit = "--ocr-page-timeout" if options.page_timeout <= left else "--ocr-timeout"
        return f"{message} ({limit})"
    return message
