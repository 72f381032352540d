"""`ParseLimits`: what reading one upload's text may cost beyond its size (a PDF's pages, a
DOCX's unpacked bytes, the time it takes, the pages left to OCR and an image's pixels), and the
`Deadline` readers check between pages and blocks. A limit left None is off (the library's
callers, app/docs, set them from the server's settings); OCR is off unless `ocr_max_pages` is
set."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rag.errors import DocumentError


@dataclass(slots=True, frozen=True)
class ParseLimits:
    max_pages: int | None = None  # pages of a PDF
    max_unpacked_bytes: int | None = None  # a DOCX's parts, unpacked, together
    timeout: float | None = None  # seconds reading the text may take
    # Pages without a text layer (and image uploads) left to OCR, at most; None: no OCR here
    # (`no_ocr` says why: such pages are left out, image uploads refused).
    ocr_max_pages: int | None = None
    no_ocr: str = "OCR is off"
    max_image_pixels: int = 50_000_000  # an image upload's page, width x height


class Deadline:
    """The time a reader has left; `check` between units of work raises `DocumentError`
    (too large: the upload is refused with a 413, as one over a size limit) once it is up."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds

    def check(self, doing: str) -> None:
        if self._end is not None and time.monotonic() >= self._end:
            raise DocumentError(
                f"reading the document took longer than {self.seconds:g} s (--doc-parse-timeout;"
                f" stopped while {doing})",
                too_large=True,
            )
