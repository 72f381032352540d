"""The streaming upload reader: byte limits while reading, multipart and raw bodies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import pytest

from app.api.kvchat.media_upload import MULTIPART_OVERHEAD, read_upload
from app.engine.request import RequestError

BOUNDARY = "kvchat-test-boundary"
FORM = f"multipart/form-data; boundary={BOUNDARY}"


def form(*parts: tuple[str, bytes], filename: str = "x.png") -> bytes:
    out = b""
    for name, data in parts:
        fn = f'; filename="{filename}"' if name == "file" else ""
        out += (
            (
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"{fn}\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + b"\r\n"
        )
    return out + f"--{BOUNDARY}--\r\n".encode()


class Body:
    """An async body in chunks that records how much of it was consumed."""

    def __init__(self, data: bytes | Iterable[bytes], chunk: int = 1000) -> None:
        if isinstance(data, bytes):
            data = [data[i : i + chunk] for i in range(0, len(data), chunk)]
        self.chunks = data
        self.consumed = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            self.consumed += len(c)
            yield c


def read(ctype: str | None, body: Body, limit: int, length: str | None = None) -> bytes:
    return asyncio.run(read_upload(ctype, length, body, limit))


def status(ctype: str | None, body: Body, limit: int, length: str | None = None) -> RequestError:
    with pytest.raises(RequestError) as e:
        read(ctype, body, limit, length)
    return e.value


def test_raw_body_under_the_limit():
    assert read("image/png", Body(b"x" * 5000), 5000) == b"x" * 5000
    assert read("IMAGE/JPEG; charset=binary", Body(b"abc"), 10) == b"abc"


def test_raw_body_stops_reading_past_the_limit():
    def endless() -> Iterable[bytes]:
        while True:  # a body that never ends: only stopping early finishes this test
            yield b"y" * 4096

    body = Body(endless())
    err = status("image/png", body, 10_000)
    assert err.status == 413 and "10000" in err.message
    assert body.consumed <= 10_000 + 4096


def test_declared_length_over_the_limit_is_refused_before_reading():
    body = Body(b"z" * 100)
    assert status("image/gif", body, 50, length="100").status == 413
    assert body.consumed == 0
    assert status(FORM, body, 50, length=str(50 + MULTIPART_OVERHEAD + 1)).status == 413
    assert body.consumed == 0


def test_other_content_types_are_415():
    for ctype in (None, "application/json", "text/plain"):
        err = status(ctype, Body(b"{}"), 100)
        assert err.status == 415 and "multipart/form-data" in err.message


def test_multipart_file_field_is_extracted():
    data = bytes(range(256)) * 20 + b"\r\n--not-the-boundary\r\n"
    body = form(("purpose", b"vision"), ("file", data))
    for chunk in (1, 7, 1000, len(body)):  # boundaries split across chunks
        assert read(FORM, Body(body, chunk), len(data)) == data


def test_multipart_file_over_the_limit_is_413_while_streaming():
    def parts() -> Iterable[bytes]:
        yield form(("file", b""))[: -len(f"\r\n--{BOUNDARY}--\r\n")]
        while True:
            yield b"q" * 4096

    body = Body(parts())
    assert status(FORM, body, 20_000).status == 413
    assert body.consumed < 20_000 + 2 * 4096


def test_multipart_skipped_fields_count_towards_the_cap():
    body = Body(form(("purpose", b"p" * (MULTIPART_OVERHEAD + 200)), ("file", b"ok")))
    assert status(FORM, body, 100).status == 413


def test_multipart_errors_are_400():
    missing = status(FORM, Body(form(("purpose", b"vision"))), 100)
    assert missing.status == 400 and "'file'" in missing.message
    two = status(FORM, Body(form(("file", b"a"), ("file", b"b"))), 100)
    assert two.status == 400 and "one 'file'" in two.message
    truncated = status(FORM, Body(form(("file", b"abc"))[:-10]), 100)
    assert truncated.status == 400 and "closing boundary" in truncated.message
    no_boundary = status("multipart/form-data", Body(b""), 100)
    assert no_boundary.status == 400 and "boundary" in no_boundary.message
    garbage = status(FORM, Body(b"this is not multipart at all" * 10), 100)
    assert garbage.status == 400
