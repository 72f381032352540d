"""Image uploads as pages: a photo or scan (PNG, JPEG, TIFF, WebP), each frame of a
multi-page TIFF one page.

`count_pages` checks an upload before anything is stored: the format, every frame's width x
height from its header before a pixel is decoded (a small file that would expand to gigabytes is
refused cheaply, as a bad image: 400), then each frame decoded once (a truncated or corrupt
image is refused now, not found out in the background). `page_image` gives the OCR worker one
page, EXIF orientation applied (the page the user sees is the page that is read), greyscale.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from rag.errors import DocumentError
from rag.parse_limits import Deadline

FORMATS = ("PNG", "JPEG", "TIFF", "WEBP")  # Pillow's names


@contextmanager
def _opened(data: bytes, max_pixels: int) -> Iterator[Image.Image]:
    """The image, every way Pillow can fail on bad data turned into `DocumentError`. Pillow's
    own decompression-bomb guard (Image.MAX_IMAGE_PIXELS) refuses headers past it first."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                if image.format not in FORMATS:
                    raise DocumentError(
                        f"image format {image.format or 'unknown'} is not supported; send "
                        + ", ".join(FORMATS)
                    )
                yield image
    except DocumentError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise DocumentError(
            f"the image has more pixels than the limit of {max_pixels} (--ocr-max-pixels): {e}"
        ) from None
    except UnidentifiedImageError:
        raise DocumentError("the file is not an image this server can read") from None
    except (OSError, ValueError, SyntaxError, EOFError, MemoryError) as e:
        raise DocumentError(f"the image is corrupt or truncated: {e}") from None


def _check_size(image: Image.Image, page: int, max_pixels: int) -> None:
    width, height = image.size
    if width * height > max_pixels:
        raise DocumentError(
            f"page {page} of the image has {width}x{height} pixels; the limit is {max_pixels}"
            " pixels (--ocr-max-pixels)"
        )


def count_pages(data: bytes, max_pixels: int, max_pages: int | None, deadline: Deadline) -> int:
    """The image's pages (frames), each checked and decoded once; `DocumentError` (400, or
    413 over a limit) saying what is wrong."""
    with _opened(data, max_pixels) as image:
        pages = 0
        while True:
            try:
                image.seek(pages)
            except EOFError:
                break
            pages += 1
            if max_pages is not None and pages > max_pages:
                raise DocumentError(
                    f"the image has more than {max_pages} pages; the limit is {max_pages}"
                    " (--ocr-max-pages)",
                    too_large=True,
                )
            deadline.check(f"reading page {pages} of the image")
            _check_size(image, pages, max_pixels)
            image.load()
        return pages


def page_image(data: bytes, page: int, max_pixels: int) -> Image.Image:
    """Page `page` (1-based) of a checked upload, upright and greyscale."""
    with _opened(data, max_pixels) as image:
        try:
            image.seek(page - 1)
        except EOFError:
            raise DocumentError(f"the image has no page {page}") from None
        _check_size(image, page, max_pixels)
        return _grey(ImageOps.exif_transpose(image))


def _grey(image: Image.Image) -> Image.Image:
    """Greyscale; transparency composited over white (a transparent scan's text stays dark),
    16-bit and float images scaled to their own range (not clipped to white)."""
    if image.mode in ("I", "F") or image.mode.startswith("I;16"):
        pixels = np.asarray(image.convert("F"), dtype=np.float32)
        low, high = float(pixels.min()), float(pixels.max())
        scaled = (pixels - low) * (255.0 / (high - low)) if high > low else pixels * 0 + 255
        return Image.fromarray(scaled.astype(np.uint8), "L")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("L")
    return image.convert("L")
