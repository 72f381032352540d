"""Scanned pages made on the spot for tests: text rendered with DejaVu (fonts-dejavu-core) and
degraded as a scanner or a phone would (bench/workloads/scanned_pages.py), as images, image-only
PDFs (no text layer) and PDFs mixing text pages with scanned ones."""

from __future__ import annotations

import io
import random

from fpdf import FPDF
from PIL import Image

from bench.workloads.scanned_pages import Condition, degrade, render

SCAN = Condition("scan", 200, skew=(1.0, 2.0), noise=10.0, blur=0.5, jpeg=70)
PHOTO = Condition("photo", 150, skew=(2.0, 3.0), noise=15.0, blur=0.7, jpeg=60, light=0.3)


def scanned_page(text: str, condition: Condition = SCAN, seed: int = 0) -> Image.Image:
    """`text` on an A4 page, as `condition` gives it (greyscale, at the condition's dpi)."""
    return degrade(render(text, points=12.0), condition, random.Random(seed))


def encoded(image: Image.Image, fmt: str = "PNG", **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def pdf_of(pages: list[str | Image.Image]) -> bytes:
    """One page per item: a string as a text page (a text layer), an image as a scanned page
    filling an A4 page (no text layer)."""
    pdf = FPDF(format="A4")
    pdf.set_font("helvetica", size=12)
    for page in pages:
        pdf.add_page()
        if isinstance(page, str):
            pdf.multi_cell(0, 8, page)
        else:
            pdf.image(page.convert("RGB"), x=0, y=0, w=pdf.w, h=pdf.h)
    return bytes(pdf.output())
