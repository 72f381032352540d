"""Scanned pages made from real text: paragraphs of this repository's docs rendered as a page
image with a real TrueType font (Debian's DejaVu, fonts-dejavu-core), then degraded as a scanner
or a phone camera would: lower resolution, a slight skew, uneven light, blur, noise and JPEG
artifacts. The OCR bench (bench/ocr_accuracy.py) and the OCR tests share it; everything is
drawn from a seeded `random.Random`, so a set is the same on every run.
"""

from __future__ import annotations

import io
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

ROOT = Path(__file__).resolve().parents[2]
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FONTS = ("DejaVuSerif.ttf", "DejaVuSans.ttf")
A4_INCHES = (8.27, 11.69)
MARGIN_INCHES = 0.9


@dataclass(slots=True, frozen=True)
class Condition:
    """How a page is degraded: `dpi` it is rendered at (the scanner's), skew in degrees (a
    random sign), noise (Gaussian sigma in grey levels), blur radius in pixels, JPEG quality
    (None: lossless), `light` (how much darker one corner is, 0..1: a photo's uneven light),
    `columns` of text on the page (read down the first, then the next)."""

    name: str
    dpi: int
    skew: tuple[float, float] = (0.0, 0.0)
    noise: float = 0.0
    blur: float = 0.0
    jpeg: int | None = None
    light: float = 0.0
    columns: int = 1


CONDITIONS = (
    Condition("clean 300 dpi", 300),
    Condition("scan 200 dpi", 200, skew=(1.0, 2.0), noise=12.0, blur=0.6, jpeg=60),
    Condition("photo 150 dpi", 150, skew=(2.0, 3.0), noise=18.0, blur=0.8, jpeg=45, light=0.35),
    Condition("fax 100 dpi", 100, skew=(1.0, 3.0), noise=10.0, jpeg=50),
    Condition("two columns, scan 200 dpi", 200, (1.0, 2.0), 12.0, 0.6, 60, columns=2),
)


def font(name: str = FONTS[0], points: float = 11.0, dpi: int = 300) -> ImageFont.FreeTypeFont:
    path = FONT_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: install Debian's fonts-dejavu-core")
    return ImageFont.truetype(str(path), round(points * dpi / 72))


def paragraphs(min_words: int = 25) -> list[str]:
    """Prose paragraphs of docs/*.md, Markdown syntax taken out, in a stable order."""
    found = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        in_code = False
        for block in re.split(r"\n\s*\n", path.read_text()):
            if block.lstrip().startswith("```"):
                in_code = block.count("```") % 2 == 1 and not in_code
                continue
            if in_code or block.lstrip()[:1] in ("#", "|", "<", ">", "-", "*") or "```" in block:
                continue
            text = _plain(block)
            if len(text.split()) >= min_words:
                found.append(text)
    return found


def _plain(markdown: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)  # links: their words
    text = re.sub(r"[`*]", "", text)
    return " ".join(text.split())


def page_texts(n_pages: int, words_per_page: int = 280, seed: int = 0) -> list[str]:
    """`n_pages` texts of about `words_per_page` words each, whole paragraphs."""
    rng = random.Random(seed)
    pool = paragraphs()
    rng.shuffle(pool)
    pages, current, words = [], [], 0
    for para in pool:
        current.append(para)
        words += len(para.split())
        if words >= words_per_page:
            pages.append("\n\n".join(current))
            current, words = [], 0
            if len(pages) == n_pages:
                break
    return pages


def render(
    text: str, dpi: int = 300, font_name: str = FONTS[0], points: float = 11.0, columns: int = 1
) -> Image:
    """`text` laid out on a white A4 page at `dpi` (greyscale) in `columns`, wrapped to the
    margins; the reference text is exactly what is drawn (words never cut), in reading order."""
    width, height = (round(i * dpi) for i in A4_INCHES)
    margin, gutter = round(MARGIN_INCHES * dpi), round(0.3 * dpi)
    column_width = (width - 2 * margin - (columns - 1) * gutter) // columns
    face = font(font_name, points, dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    line_height = round(face.size * 1.35)
    column, y = 0, margin
    for para in text.split("\n\n"):
        for line in wrap(para, face, column_width):
            if y + line_height > height - margin:
                column, y = column + 1, margin
                if column == columns:
                    raise ValueError("the text does not fit on one page")
            draw.text((margin + column * (column_width + gutter), y), line, fill=0, font=face)
            y += line_height
        y += line_height // 2
    return image


def wrap(paragraph: str, face: ImageFont.FreeTypeFont, width: int) -> list[str]:
    lines, line = [], ""
    for word in paragraph.split():
        candidate = f"{line} {word}" if line else word
        if line and face.getlength(candidate) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


def degrade(image: Image, condition: Condition, rng: random.Random) -> Image:
    """A 300-dpi page as `condition`'s scanner or camera would give it (greyscale)."""
    page = image.convert("L")
    if condition.dpi != 300:
        scale = condition.dpi / 300
        size = (round(page.width * scale), round(page.height * scale))
        page = page.resize(size, Image.Resampling.LANCZOS)
    low, high = condition.skew
    if high > 0:
        angle = rng.uniform(low, high) * rng.choice((-1, 1))
        page = page.rotate(angle, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    if condition.blur > 0:
        page = page.filter(ImageFilter.GaussianBlur(condition.blur))
    pixels = np.asarray(page, dtype=np.float32)
    if condition.light > 0:  # darker towards one corner, as a phone's shadow
        ys, xs = np.mgrid[0 : pixels.shape[0], 0 : pixels.shape[1]]
        ramp = (xs / pixels.shape[1] + ys / pixels.shape[0]) / 2
        pixels = pixels * (1 - condition.light * ramp)
    if condition.noise > 0:
        noise = np.random.default_rng(rng.randrange(2**32)).normal(0, condition.noise, pixels.shape)
        pixels = pixels + noise
    page = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "L")
    if condition.jpeg is not None:
        buffer = io.BytesIO()
        page.save(buffer, "JPEG", quality=condition.jpeg)
        page = Image.open(io.BytesIO(buffer.getvalue()))
        page.load()
    return page


def scanned_pdf(pages: list[Image], dpi: int = 300) -> bytes:
    """Image-only pages as one PDF (Pillow's writer: no text layer), at `dpi`."""
    buffer = io.BytesIO()
    first, *rest = [p.convert("RGB") for p in pages]
    first.save(buffer, "PDF", save_all=True, append_images=rest, resolution=float(dpi))
    return buffer.getvalue()


def image_bytes(image: Image, fmt: str = "PNG", dpi: int = 300) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, dpi=(dpi, dpi))
    return buffer.getvalue()
