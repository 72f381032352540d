from __future__ import annotations

import base64
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from mm.image import ImageError, ImageLimits, decode_image, image_bytes_from_url


def encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def picture(seed: int, size: tuple[int, int] = (32, 24)) -> Image.Image:
    im = Image.new("RGB", size)
    im.putdata(
        [((x * 7 + seed) % 256, (x * 13) % 256, seed % 256) for x in range(size[0] * size[1])]
    )
    return im


def test_the_same_pixels_in_another_lossless_encoding_have_the_same_id():
    im = picture(1)
    png = decode_image(encode(im, "PNG"))
    png9 = decode_image(encode(im, "PNG", compress_level=9, optimize=True))
    webp = decode_image(encode(im, "WEBP", lossless=True))
    assert png.id == png9.id == webp.id
    assert webp.mime_type == "image/webp" and png.mime_type == "image/png"
    assert (png.width, png.height) == (32, 24) and len(png.rgb) == 32 * 24 * 3


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 255), st.integers(0, 255))
def test_different_pixels_of_the_same_size_have_different_ids(a: int, b: int):
    if a == b:
        return
    assert decode_image(encode(picture(a), "PNG")).id != decode_image(encode(picture(b), "PNG")).id


def test_size_is_part_of_the_identity():
    flat = Image.new("RGB", (8, 2), (9, 9, 9))
    tall = Image.new("RGB", (2, 8), (9, 9, 9))
    assert decode_image(encode(flat, "PNG")).id != decode_image(encode(tall, "PNG")).id


def test_exif_orientation_is_applied():
    im = picture(3, (20, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    rotated = decode_image(encode(im, "JPEG", exif=exif.tobytes(), quality=95))
    plain = decode_image(encode(im, "JPEG", quality=95))
    assert (plain.width, plain.height) == (20, 10)
    assert (rotated.width, rotated.height) == (10, 20)


def test_first_frame_of_a_gif():
    frames = [Image.new("P", (8, 8), i) for i in (1, 2)]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    first = decode_image(encode(frames[0], "GIF"))
    assert decode_image(data).id == first.id


def test_transparency_is_composited_over_white():
    clear = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    white = Image.new("RGB", (4, 4), (255, 255, 255))
    assert decode_image(encode(clear, "PNG")).id == decode_image(encode(white, "PNG")).id


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "empty"),
        (b"not an image at all", "not an image"),
        (encode(picture(1), "PNG")[:60], "corrupt"),
        (encode(picture(1), "BMP"), "not supported"),
        (encode(picture(1), "TIFF"), "not supported"),
    ],
)
def test_bad_images_are_refused_with_a_reason(data: bytes, words: str):
    with pytest.raises(ImageError, match=words):
        decode_image(data)


def test_limits_are_checked_before_decoding():
    bomb = encode(Image.new("L", (6000, 6000)), "PNG")  # tiny file, 36 M pixels
    assert len(bomb) < 100_000
    with pytest.raises(ImageError, match="pixels"):
        decode_image(bomb)
    with pytest.raises(ImageError, match="bytes"):
        decode_image(encode(picture(1), "PNG"), ImageLimits(max_bytes=100))


def test_data_urls():
    png = encode(picture(2), "PNG")
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    assert image_bytes_from_url(url) == png
    for bad, words in [
        ("http://example.com/a.png", "remote"),
        ("data:image/png,rawbytes", "base64"),
        ("data:image/png;base64,@@@", "base64"),
        ("file:///etc/passwd", "media-path"),
    ]:
        with pytest.raises(ImageError, match=words):
            image_bytes_from_url(bad)


def test_file_urls_are_read_only_under_the_media_path(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.png").write_bytes(b"png bytes")
    (tmp_path / "secret").write_bytes(b"secret")
    with pytest.raises(ImageError, match="--media-path"):
        image_bytes_from_url("file://x.png")
    limits = ImageLimits(media_path=str(tmp_path / "a"))
    assert image_bytes_from_url("file://x.png", limits) == b"png bytes"
    assert image_bytes_from_url("file:///x.png", limits) == b"png bytes"
    for escape in ("file://../secret", "file://./x.png", "file://"):
        with pytest.raises(ImageError, match="not allowed"):
            image_bytes_from_url(escape, limits)
    (tmp_path / "a" / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(ImageError, match="does not exist"):
        image_bytes_from_url("file://link", limits)  # a link out of the directory
    small = ImageLimits(max_bytes=4, media_path=str(tmp_path / "a"))
    with pytest.raises(ImageError, match="larger than"):
        image_bytes_from_url("file://x.png", small)
