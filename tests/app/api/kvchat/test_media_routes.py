"""POST/GET /v1/media through a real server process."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image
from sqlalchemy import update

from app.db import models
from app.db.models import MediaBytes
from app.db.store import Store
from bench.lib.server_process import ServerProcess
from mm.image import ImageLimits

DEFAULT_LIMIT = ImageLimits().max_bytes  # the server runs with the default limits


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "1", "-c", "1024") as srv:
        yield srv


def image(fmt: str, size: tuple[int, int] = (32, 24), color=(40, 160, 90)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return buf.getvalue()


def upload(server: ServerProcess, data: bytes, name: str = "x.png") -> httpx.Response:
    files = {"file": (name, data, "application/octet-stream")}
    return httpx.post(
        server.base_url + "/v1/media", files=files, data={"purpose": "vision"}, timeout=60
    )


def upload_raw(server: ServerProcess, data: bytes, ctype: str = "image/png") -> httpx.Response:
    return httpx.post(
        server.base_url + "/v1/media", content=data, headers={"Content-Type": ctype}, timeout=60
    )


def error_of(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["type"]
    return err["message"]


def test_upload_multipart_and_raw_give_the_same_media(server: ServerProcess):
    data = image("PNG")
    r = upload(server, data)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["object"] == "media" and body["id"] == models.media_id(body["sha256"], "")
    assert (body["bytes"], body["mime_type"]) == (len(data), "image/png")
    assert (body["width"], body["height"]) == (32, 24)
    assert isinstance(body["created_at"], int)
    raw = upload_raw(server, data)
    assert raw.status_code == 201, raw.text
    assert raw.json() == body  # idempotent by content: the same record

    other = upload_raw(server, image("WEBP", color=(1, 2, 3)), "image/webp")
    assert other.status_code == 201 and other.json()["id"] != body["id"]
    assert other.json()["mime_type"] == "image/webp"


def test_get_metadata_and_content(server: ServerProcess):
    data = image("JPEG", (20, 10))
    created = upload(server, data, "photo.jpg").json()
    meta = httpx.get(f"{server.base_url}/v1/media/{created['id']}", timeout=30)
    assert meta.status_code == 200 and meta.json() == created
    content = httpx.get(f"{server.base_url}/v1/media/{created['id']}/content", timeout=30)
    assert content.status_code == 200
    assert content.content == data
    assert content.headers["content-type"] == "image/jpeg"
    assert content.headers["etag"] == f'"{created["sha256"]}"'


def test_bad_images_are_400_with_the_reason(server: ServerProcess):
    assert "not an image" in error_of(upload(server, b"just some text, no pixels"), 400)
    assert "BMP" in error_of(upload(server, image("BMP"), "x.bmp"), 400)
    truncated = image("PNG", (64, 64), (9, 9, 9))[:70]
    assert "truncated" in error_of(upload_raw(server, truncated), 400)
    assert "empty" in error_of(upload_raw(server, b""), 400)
    wrong_field = {"image": ("x.png", image("PNG"), "image/png")}
    assert "'file'" in error_of(
        httpx.post(server.base_url + "/v1/media", files=wrong_field, timeout=30), 400
    )
    assert "Content-Type" in error_of(
        httpx.post(server.base_url + "/v1/media", json={"file": "x"}, timeout=30), 415
    )
    assert httpx.get(server.base_url + "/health", timeout=10).status_code == 200


def test_over_the_limit_is_413(server: ServerProcess):
    declared = upload_raw(server, b"\0" * (DEFAULT_LIMIT + 1))
    assert "limit" in error_of(declared, 413)

    def chunked() -> Iterator[bytes]:  # no Content-Length: the server must count as it reads
        for _ in range(DEFAULT_LIMIT // (1 << 20) + 8):
            yield b"\0" * (1 << 20)

    streamed = httpx.post(
        server.base_url + "/v1/media",
        content=chunked(),
        headers={"Content-Type": "image/png"},
        timeout=60,
    )
    assert "limit" in error_of(streamed, 413)
    assert upload(server, image("GIF")).status_code == 201  # the server is still fine


def test_damaged_bytes_are_410_until_uploaded_again(server: ServerProcess):
    data = image("PNG", (12, 12), (250, 250, 0))
    created = upload(server, data).json()
    data_dir = Path(server.args[server.args.index("--data-dir") + 1])  # its own, and database
    store = Store(f"sqlite:///{data_dir / 'kvchat.db'}")
    try:
        with store.transaction(write=True) as s:
            s.execute(
                update(MediaBytes)
                .where(MediaBytes.media_id == created["id"])
                .values(data=b"not the same bytes")
            )
    finally:
        store.close()
    for suffix in ("", "/content"):
        r = httpx.get(f"{server.base_url}/v1/media/{created['id']}{suffix}", timeout=30)
        assert "upload the image again" in error_of(r, 410)
    assert upload(server, data).json() == created
    r = httpx.get(f"{server.base_url}/v1/media/{created['id']}/content", timeout=30)
    assert r.status_code == 200 and r.content == data


def test_unknown_and_malformed_ids_are_404(server: ServerProcess):
    for media_id in ("media-" + "0" * 24, "media-nothex", "abc"):
        for suffix in ("", "/content"):
            r = httpx.get(f"{server.base_url}/v1/media/{media_id}{suffix}", timeout=30)
            assert media_id in error_of(r, 404)
