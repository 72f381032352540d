"""A page turned straight before OCR: a scan or photo a few degrees off is rotated back.

Tesseract's page layout (columns, blocks, lines) drops whole lines of a noisy page that is 1-3
degrees off (bench/ocr_accuracy.py: a character error rate of 0.19-0.49 on such pages) and reads
them all once the page is straight. The angle is found by projection profiles: on a small
copy of the page's dark pixels, the angle whose row sums change most sharply from row to row is
the one that lines the text up with the rows. Up to `MAX_DEGREES` either way; a page whose best
angle is within `STEP` of zero is left as it is.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

MAX_DEGREES = 5.0
STEP = 0.25
SAMPLE_SIDE = 800  # the small copy's longer side, pixels


def skew_angle(page: Image.Image) -> float:
    """Degrees to rotate `page` by (counter-clockwise, as `Image.rotate`) to make its lines
    level; 0.0 for a page without text lines."""
    small = page.convert("L")
    scale = SAMPLE_SIDE / max(small.size)
    if scale < 1:
        size = (max(1, round(small.width * scale)), max(1, round(small.height * scale)))
        small = small.resize(size, Image.Resampling.BILINEAR)
    pixels = np.asarray(small, dtype=np.float32)
    spread = float(pixels.std())
    if spread < 1.0:
        return 0.0  # a blank page
    ink = Image.fromarray(((pixels < pixels.mean() - 2 * spread) * 255).astype(np.uint8))
    best, angle = -1.0, 0.0
    for degrees in np.arange(-MAX_DEGREES, MAX_DEGREES + STEP / 2, STEP):
        rows = np.asarray(ink.rotate(float(degrees), Image.Resampling.NEAREST), np.float32)
        profile = rows.sum(axis=1)
        score = float(np.square(np.diff(profile)).sum())
        if score > best:
            best, angle = score, float(degrees)
    return angle


def deskew(page: Image.Image) -> Image.Image:
    """`page` rotated level (greyscale, the corners it gains white), or as it is."""
    angle = skew_angle(page)
    if abs(angle) < STEP:
        return page
    return page.convert("L").rotate(angle, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
