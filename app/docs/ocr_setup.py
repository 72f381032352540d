"""`OcrSetup`: what OCR this server does, from its settings, found out once at start.

With `--ocr tesseract` the engine is probed (installed, answering, with data for every language
of `--ocr-lang`); where it is not usable the server runs without OCR and says why in its log
and in every refusal of an upload that needs it (a PDF of scanned pages, an image), instead of
failing to start over an optional part. Uploads are parsed within `parse_limits`, and the
ingestion worker reads pages with `options`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from app.config import Settings
from rag.errors import OcrError
from rag.ocr.ocr_reader import OcrOptions
from rag.ocr.tesseract import Tesseract, probe
from rag.parse_limits import ParseLimits

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class OcrSetup:
    options: OcrOptions | None  # None: no OCR on this server
    no_ocr: str = "OCR is off on this server (--ocr off)"  # why, where options is None
    max_pages: int = 200
    max_pixels: int = 50_000_000

    def parse_limits(self, limits: ParseLimits) -> ParseLimits:
        """`limits` with OCR's: its pages and an image's pixels, or no OCR and why."""
        return replace(
            limits,
            ocr_max_pages=self.max_pages if self.options is not None else None,
            no_ocr=self.no_ocr,
            max_image_pixels=self.max_pixels,
        )


def ocr_setup(settings: Settings) -> OcrSetup:
    limits = {"max_pages": settings.ocr_max_pages, "max_pixels": settings.ocr_max_pixels}
    if settings.ocr == "off":
        return OcrSetup(None, **limits)
    try:
        info = probe()
    except OcrError as e:
        reason = f"OCR is not available on this server: {e.message}"
        log.warning("%s; scanned PDF pages and image uploads are not read", reason)
        return OcrSetup(None, reason, **limits)
    missing = [lang for lang in settings.ocr_lang.split("+") if lang not in info.languages]
    if missing:
        reason = (
            f"OCR is not available on this server: tesseract has no data for --ocr-lang"
            f" {'+'.join(missing)} (Debian: apt-get install tesseract-ocr-{_debian(missing[0])})"
        )
        log.error("%s; installed: %s", reason, ", ".join(info.languages) or "none")
        return OcrSetup(None, reason, **limits)
    engine = Tesseract(settings.ocr_lang, threads=1, binary=info.path)
    options = OcrOptions(
        engine,
        dpi=settings.ocr_dpi,
        page_timeout=settings.ocr_page_timeout,
        timeout=settings.ocr_timeout,
        max_pixels=settings.ocr_max_pixels,
    )
    log.info("OCR: %s, languages %s", info.version, settings.ocr_lang)
    return OcrSetup(options, **limits)


def _debian(lang: str) -> str:
    """Debian's package suffix of a tesseract language code (chi_sim: chi-sim)."""
    return lang.lower().replace("_", "-")
