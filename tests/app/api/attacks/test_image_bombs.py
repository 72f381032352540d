"""Uploads for OCR that would cost the server more than their size: images whose few bytes
decode to gigapixels (a PNG's header, a PDF page holding an image of zeros), more pages than
OCR may read (a TIFF of hundreds of frames, a long scanned PDF), corrupt images. Each is refused
at upload in the API's shape (`param: file`), before anything is stored or decoded past the
limit, and the server goes on serving.

The payloads are bench/workloads/hostile_requests.py's.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from bench.workloads import hostile_requests as hostile
from tests.rag.scans import encoded, pdf_of, scanned_page

TIMEOUT = 60.0  # a refusal comes long before this: the bound says only that nothing hung
PAGE = scanned_page("A page about tides.")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("bombs")
    args = ("-np", "2", "-c", "2048", "--data-dir", str(data), "--doc-prefill-tokens", "0")
    with ServerProcess(*args, "--ocr-max-pages", "3") as srv:
        yield srv


@pytest.fixture
def collection(server: ServerProcess) -> str:
    r = httpx.post(server.base_url + "/v1/collections", json={"name": "bombs"}, timeout=TIMEOUT)
    return r.json()["id"]


def refused(
    server: ServerProcess, collection: str, file: tuple[str, bytes, str], status: int
) -> dict:
    url = f"{server.base_url}/v1/collections/{collection}/documents"
    r = httpx.post(url, files={"file": file}, timeout=TIMEOUT)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == "file"
    assert error["code"] == ("invalid_document" if status == 400 else "request_too_large")
    listed = httpx.get(url, timeout=TIMEOUT).json()["data"]
    assert listed == []  # nothing stored, nothing left queued
    assert httpx.get(server.base_url + "/health", timeout=TIMEOUT).status_code == 200
    return error


@pytest.mark.parametrize(("width", "height"), [(100_000, 100_000), (8_000, 7_000)])
def test_a_png_whose_header_claims_too_many_pixels_is_refused_undecoded(
    server: ServerProcess, collection: str, width: int, height: int
):
    error = refused(server, collection, hostile.image_bomb_png(width, height).file, 400)
    assert "pixels" in error["message"] and "--ocr-max-pixels" in error["message"]


def test_a_pdf_page_holding_a_gigapixel_image_of_zeros_is_refused_unrendered(
    server: ServerProcess, collection: str
):
    error = refused(server, collection, hostile.image_bomb_pdf(30_000).file, 400)
    assert "900000000 pixels" in error["message"] and "--ocr-max-pixels" in error["message"]


@pytest.mark.parametrize(
    "file",
    [
        hostile.many_frames_tiff(500).file,
        ("long.pdf", pdf_of([PAGE] * 4), "application/pdf"),
    ],
    ids=["tiff-of-500-frames", "scanned-pdf-of-4-pages"],
)
def test_more_pages_than_ocr_may_read_are_refused_as_too_large(
    server: ServerProcess, collection: str, file: tuple[str, bytes, str]
):
    assert "--ocr-max-pages" in refused(server, collection, file, 413)["message"]


@pytest.mark.parametrize(
    "file",
    [
        ("cut.png", encoded(PAGE, "PNG")[:-200], "image/png"),
        ("cut.jpg", encoded(PAGE, "JPEG")[:2000], "image/jpeg"),
        ("fake.tiff", b"II*\x00" + b"\xff" * 64, "image/tiff"),
    ],
    ids=["truncated-png", "truncated-jpeg", "garbage-tiff"],
)
def test_a_corrupt_image_is_refused_with_the_reason(
    server: ServerProcess, collection: str, file: tuple[str, bytes, str]
):
    message = refused(server, collection, file, 400)["message"]
    assert "corrupt or truncated" in message or "not an image" in message, message
