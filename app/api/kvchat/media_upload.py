"""Reading an upload body under a byte limit, as it streams in.

Two shapes are accepted: `multipart/form-data` with a `file` field (as OpenAI's files API
takes uploads) and a raw body with an image Content-Type. Either way the body is read chunk by
chunk and refused with 413 as soon as it passes the limit, so a huge body is never held in
memory (nor spooled to disk, as a generic form parser would do).
"""

from __future__ import annotations

from collections.abc import AsyncIterable

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from app.engine.request import RequestError

# Room for the boundaries, part headers and small fields (OpenAI clients send `purpose`).
MULTIPART_OVERHEAD = 64 << 10
FILE_FIELD = "file"


def too_large(limit: int) -> RequestError:
    return RequestError(
        f"the upload is larger than the limit of {limit} bytes",
        param=FILE_FIELD,
        code="request_too_large",
        status=413,
    )


def _unsupported(content_type: str) -> RequestError:
    return RequestError(
        f"unsupported Content-Type {content_type or '(none)'!r}: send multipart/form-data with a "
        f"{FILE_FIELD!r} field, or the image itself as the body with Content-Type image/png, "
        "image/jpeg, image/webp or image/gif",
        code="unsupported_media_type",
        status=415,
    )


def _bad_form(message: str) -> RequestError:
    return RequestError(message, param=FILE_FIELD, code="invalid_multipart", status=400)


async def read_upload(
    content_type: str | None,
    content_length: str | None,
    chunks: AsyncIterable[bytes],
    max_bytes: int,
) -> bytes:
    """The uploaded file's bytes; RequestError 400 (bad form), 413 (too large), 415 (type)."""
    ctype, params = parse_options_header(content_type)
    kind = ctype.decode("latin-1").lower()
    if kind == "multipart/form-data":
        boundary = params.get(b"boundary")
        if not boundary:
            raise _bad_form("the multipart Content-Type has no boundary")
        _check_length(content_length, max_bytes + MULTIPART_OVERHEAD, max_bytes)
        return await read_multipart_file(boundary, chunks, max_bytes)
    # Any image type is read: the decoder, not the header, decides the format, so a BMP gets a
    # 400 that names it rather than a 415 about its label.
    if kind.startswith("image/") or kind == "application/octet-stream":
        _check_length(content_length, max_bytes, max_bytes)
        return await read_limited(chunks, max_bytes)
    raise _unsupported(kind)


def _check_length(content_length: str | None, cap: int, limit: int) -> None:
    """A declared length over the cap is refused before a byte of the body is read."""
    if content_length is None:
        return  # chunked: counted while reading
    try:
        declared = int(content_length)
    except ValueError:
        raise _bad_form("the Content-Length header is not a number") from None
    if declared > cap:
        raise too_large(limit)


async def read_limited(chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """The whole body, or 413 as soon as it passes `limit` bytes."""
    buf = bytearray()
    async for chunk in chunks:
        if len(buf) + len(chunk) > limit:
            raise too_large(limit)
        buf += chunk
    return bytes(buf)


class _FilePart:
    """Collects the data of the `file` part as the multipart parser reports it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.header_field = bytearray()
        self.header_value = bytearray()
        self.disposition = b""
        self.in_file = False
        self.data: bytearray | None = None  # set once a file part has begun
        self.ended = False

    def callbacks(self) -> dict:
        return {
            "on_part_begin": self.on_part_begin,
            "on_header_field": lambda d, s, e: self.header_field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self.header_value.extend(d[s:e]),
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_part_data": self.on_part_data,
            "on_end": self.on_end,
        }

    def on_part_begin(self) -> None:
        self.disposition = b""
        self.in_file = False

    def on_header_end(self) -> None:
        if bytes(self.header_field).strip().lower() == b"content-disposition":
            self.disposition = bytes(self.header_value)
        self.header_field.clear()
        self.header_value.clear()

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.disposition)
        if options.get(b"name") != FILE_FIELD.encode():
            return  # another field (e.g. `purpose`): skipped, its size counts in the overall cap
        if self.data is not None:
            raise _bad_form(f"send one {FILE_FIELD!r} field per upload")
        self.in_file = True
        self.data = bytearray()

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if not self.in_file:
            return
        assert self.data is not None
        if len(self.data) + (end - start) > self.limit:
            raise too_large(self.limit)
        self.data += data[start:end]

    def on_end(self) -> None:
        self.ended = True


async def read_multipart_file(boundary: bytes, chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """The bytes of the `file` field; 413 as soon as it (or the whole body) is too large."""
    part = _FilePart(limit)
    try:
        parser = MultipartParser(boundary, part.callbacks())
    except FormParserError as e:
        raise _bad_form(f"the multipart body is malformed: {e}") from None
    cap = limit + MULTIPART_OVERHEAD  # the whole body: bounds the fields that are skipped too
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > cap:
            raise too_large(limit)
        try:
            parser.write(chunk)
        except FormParserError as e:
            raise _bad_form(f"the multipart body is malformed: {e}") from None
    if not part.ended:
        raise _bad_form("the multipart body ends before its closing boundary")
    if part.data is None:
        raise _bad_form(f"the multipart body has no {FILE_FIELD!r} field")
    return bytes(part.data)
