from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from bench.workloads.hostile_requests import image_bomb_png
from rag.errors import DocumentError
from rag.ocr.page_images import count_pages, page_image
from rag.parse_limits import Deadline
from tests.rag.scans import encoded

PIXELS = 50_000_000


def frames(n: int, size: tuple[int, int] = (40, 30)) -> bytes:
    pages = [Image.new("L", size, 255 - i) for i in range(n)]
    return encoded(pages[0], "TIFF", save_all=True, append_images=pages[1:])


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "TIFF"])
def test_an_image_of_each_format_is_one_page(fmt: str):
    data = encoded(Image.new("RGB", (64, 48), "white"), fmt)
    assert count_pages(data, PIXELS, 10, Deadline(None)) == 1
    assert page_image(data, 1, PIXELS).mode == "L"


def test_each_frame_of_a_tiff_is_a_page():
    data = frames(3)
    assert count_pages(data, PIXELS, 10, Deadline(None)) == 3
    assert page_image(data, 3, PIXELS).getpixel((0, 0)) == 253


def test_more_frames_than_the_page_limit_are_refused_as_too_large():
    with pytest.raises(DocumentError, match="--ocr-max-pages") as e:
        count_pages(frames(4), PIXELS, 3, Deadline(None))
    assert e.value.too_large


@pytest.mark.parametrize(("width", "height"), [(20_000, 20_000), (100_000, 100_000), (8000, 7000)])
def test_an_image_bomb_is_refused_from_its_header_at_once(width: int, height: int):
    data = image_bomb_png(width, height).file[1]
    t0 = time.monotonic()
    with pytest.raises(DocumentError, match="pixels") as e:
        count_pages(data, PIXELS, 10, Deadline(None))
    assert time.monotonic() - t0 < 30  # no decode of gigapixels: a hang guard, not a timing
    assert not e.value.too_large  # a bad image: 400


def test_a_frame_over_the_pixel_limit_is_refused_whatever_frame_it_is():
    pages = [Image.new("L", (40, 30), 255), Image.new("L", (400, 300), 255)]
    data = encoded(pages[0], "TIFF", save_all=True, append_images=pages[1:])
    with pytest.raises(DocumentError, match="page 2 of the image has 400x300 pixels"):
        count_pages(data, 100_000, 10, Deadline(None))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (encoded(Image.new("RGB", (300, 200), "white"), "PNG")[:-60], "corrupt or truncated"),
        (encoded(Image.new("RGB", (300, 200), "white"), "JPEG")[:300], "corrupt or truncated"),
        (b"\x89PNG\r\n\x1a\n not a png at all", "not an image"),
        (b"just words", "not an image"),
        (encoded(Image.new("RGB", (30, 20), "white"), "GIF"), "GIF is not supported"),
        (encoded(Image.new("RGB", (30, 20), "white"), "BMP"), "BMP is not supported"),
    ],
)
def test_corrupt_and_unsupported_images_are_refused_with_the_reason(data: bytes, reason: str):
    with pytest.raises(DocumentError, match=reason) as e:
        count_pages(data, PIXELS, 10, Deadline(None))
    assert not e.value.too_large


def test_the_deadline_is_checked_between_frames():
    with pytest.raises(DocumentError, match="--doc-parse-timeout"):
        count_pages(frames(2), PIXELS, 10, Deadline(0.0))


def test_a_page_comes_upright_as_its_exif_orientation_says():
    exif = Image.Exif()
    exif[0x0112] = 6  # the camera was turned: show it rotated by 90 degrees
    data = encoded(Image.new("RGB", (60, 40), "white"), "JPEG", exif=exif)
    assert page_image(data, 1, PIXELS).size == (40, 60)


def test_a_16_bit_scan_keeps_its_dark_text_dark():
    pixels = np.full((20, 30), 60_000, dtype=np.uint16)
    pixels[5:10, 5:20] = 2_000  # ink
    page = page_image(encoded(Image.fromarray(pixels), "PNG"), 1, PIXELS)
    assert page.getpixel((10, 7)) < 20 and page.getpixel((1, 1)) > 235


def test_transparency_is_white_paper():
    rgba = Image.new("RGBA", (20, 20), (0, 0, 0, 0))
    rgba.putpixel((5, 5), (0, 0, 0, 255))
    page = page_image(encoded(rgba, "PNG"), 1, PIXELS)
    assert page.getpixel((0, 0)) == 255 and page.getpixel((5, 5)) == 0
