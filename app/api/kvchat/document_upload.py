"""The body of a document upload: a multipart `file` (with optional JSON `metadata`) or a
JSON body {"filename", "text", "metadata"}; read here, taken in by app/docs/intake/doc_intake.py."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile

from app.api.kvchat.doc_schemas import TextDocumentRequest
from app.api.kvchat.media_upload import MULTIPART_OVERHEAD
from app.docs.intake.doc_intake import Upload, too_large
from app.engine.request import RequestError


async def read_document(http: Request, limit: int) -> Upload:
    ctype = http.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            body = TextDocumentRequest.model_validate_json(await http.body())
        except ValueError as e:
            raise RequestError(f"invalid document: {e}", param="text") from None
        return Upload(body.filename, body.text.encode("utf-8"), None, body.metadata)
    if ctype != "multipart/form-data":
        raise RequestError(
            'send multipart/form-data with a \'file\' field, or JSON {"filename", "text"}',
            code="unsupported_media_type",
            status=415,
        )
    length = http.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit + MULTIPART_OVERHEAD:
        raise too_large(limit)
    form = await http.form(max_files=1, max_fields=8)
    file = form.get("file")
    if not isinstance(file, UploadFile):
        raise RequestError("the multipart body has no 'file' field", param="file")
    data = await file.read(limit + 1)
    metadata = _metadata(form.get("metadata"))
    return Upload(file.filename or "upload", data, file.content_type, metadata)


def _metadata(raw: Any) -> dict[str, Any]:
    """The form's `metadata` field: a JSON object, or nothing."""
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        metadata = json.loads(raw)
    except ValueError:
        raise RequestError("metadata must be a JSON object", param="metadata") from None
    if not isinstance(metadata, dict):
        raise RequestError("metadata must be a JSON object", param="metadata")
    return metadata
