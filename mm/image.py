"""Image input: decoded and checked with Pillow; an image's identity is the hash of its pixels.

The id is what the KV cache compares, so it must not depend on the file: the same picture sent
as PNG or re-encoded losslessly (WebP lossless, another PNG compressor) is the same image, and
EXIF orientation is applied first (what the user sees is what the model sees). The encoded
size and the pixel count are checked before any pixel is decoded, so a small file that would
expand to gigabytes (a decompression bomb) is refused cheaply.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

# Pillow format name -> MIME type; anything else is refused.
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^,;]*)*),(?P<data>.*)$")


class ImageError(ValueError):
    """An image this server will not take; the message says why (for a 400)."""


@dataclass(slots=True, frozen=True)
class ImageLimits:
    max_bytes: int = 20 << 20  # encoded size
    max_pixels: int = 4096 * 4096  # width x height, checked from the header before decoding
    allow_remote: bool = False  # http(s) URLs (this deployment has no network by default)
    media_path: str | None = None  # the directory file:// URLs are read from (None: refused)


@dataclass(slots=True)
class DecodedImage:
    id: str  # BLAKE2b-256 of width, height and the RGB pixels
    width: int
    height: int
    rgb: bytes  # width * height * 3 bytes, row-major RGB888
    mime_type: str  # of the encoded input
    n_bytes: int  # encoded size


def pixel_id(width: int, height: int, rgb: bytes) -> str:
    h = hashlib.blake2b(digest_size=32)
    h.update(f"rgb888:{width}x{height}:".encode())
    h.update(rgb)
    return h.hexdigest()


def decode_image(data: bytes, limits: ImageLimits = ImageLimits()) -> DecodedImage:
    if not data:
        raise ImageError("the image is empty")
    if len(data) > limits.max_bytes:
        raise ImageError(f"the image is {len(data)} bytes; the limit is {limits.max_bytes}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                if im.format not in FORMATS:
                    raise ImageError(
                        f"image format {im.format or 'unknown'} is not supported; "
                        f"send {', '.join(sorted(FORMATS))}"
                    )
                mime = FORMATS[im.format]
                width, height = im.size
                if width * height > limits.max_pixels:
                    raise ImageError(
                        f"the image has {width}x{height} pixels; the limit is "
                        f"{limits.max_pixels} pixels"
                    )
                im.seek(0)  # an animated GIF or WebP: its first frame
                rgb = _to_rgb(ImageOps.exif_transpose(im))
    except ImageError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageError("the data is not an image this server can read") from None
    except (OSError, ValueError, SyntaxError, EOFError) as e:  # truncated or corrupt data
        raise ImageError(f"the image is corrupt or truncated: {e}") from None
    w, h = rgb.size
    pixels = rgb.tobytes()
    return DecodedImage(pixel_id(w, h, pixels), w, h, pixels, mime, len(data))


def _to_rgb(im: Image.Image) -> Image.Image:
    """RGB pixels; transparency is composited over white so it has one defined look."""
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return im.convert("RGB")


def is_remote(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def image_bytes_from_url(url: str, limits: ImageLimits = ImageLimits()) -> bytes:
    """The bytes of an `image_url`: a base64 data URL, or a file:// URL under the media path.
    Remote URLs are the caller's to fetch (a server that allows them fetches them first, with
    its own checks on where and how long); here they are refused."""
    if is_remote(url):
        if limits.allow_remote:
            raise ImageError("the image at this URL was not fetched")
        raise ImageError(
            "remote image URLs are not fetched by this server (start it with "
            "--allow-remote-images to allow them); send the image inline as a base64 data: URL "
            "or upload it to /v1/media and refer to its id"
        )
    if url.startswith("file://"):
        return _local_file(url.removeprefix("file://"), limits)
    m = _DATA_URL.match(url)
    if m is None:
        raise ImageError("image_url must be a data: URL such as data:image/png;base64,...")
    if ";base64" not in (m.group("params") or ""):
        raise ImageError("image data URLs must be base64-encoded (data:image/png;base64,...)")
    payload = m.group("data")
    if len(payload) > (limits.max_bytes * 4) // 3 + 4:
        raise ImageError(f"the image is larger than {limits.max_bytes} bytes")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the image data URL is not valid base64") from None


def _local_file(path: str, limits: ImageLimits) -> bytes:
    """A file:// URL's bytes, as llama-server's --media-path reads them: the path is relative to
    that directory (leading and doubled slashes mean nothing) and may not leave it."""
    if limits.media_path is None:
        raise ImageError("file:// URLs are not allowed unless the server runs with --media-path")
    parts = [p for p in path.split("/") if p]
    if not parts or any(p in (".", "..") or "\\" in p for p in parts):
        raise ImageError(f"file path is not allowed: {path}")
    root = Path(limits.media_path).resolve()
    target = root.joinpath(*parts).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise ImageError(f"file does not exist or cannot be opened: {path}")
    if target.stat().st_size > limits.max_bytes:
        raise ImageError(f"the image is larger than {limits.max_bytes} bytes")
    return target.read_bytes()
