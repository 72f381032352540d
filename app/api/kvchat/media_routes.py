"""Media uploads: `POST /v1/media` stores an image of the caller's tenant and returns an id that
the tenant's chat messages can refer to (the same bytes, the same id for one tenant; another
tenant's id for them differs and its upload is its own); `GET /v1/media/{id}` and
`/v1/media/{id}/content` give it back."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.api.errors import openapi_links
from app.api.kvchat.media_upload import FILE_FIELD, read_upload
from app.api.middleware.auth import tenant_of
from app.api.services import Services, ServicesDep
from app.db.records import MediaRecord
from app.engine.request import RequestError
from app.media.media_store import MediaFileError, MediaStore, image_limits, image_size
from mm.image import ImageError

router = APIRouter(prefix="/v1/media")


def media_json(record: MediaRecord, size: tuple[int, int] | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": record.id,
        "object": "media",
        "bytes": record.size,
        "mime_type": record.mime_type,
        "sha256": record.sha256,
        # Unix seconds, as in OpenAI's file objects.
        "created_at": int(record.created_at.timestamp()),
    }
    if size is not None:
        out["width"], out["height"] = size
    return out


def _media(services: Services) -> MediaStore:
    if services.media is None:  # an app built without the lifespan (some unit tests)
        raise RequestError("media storage is not available", code="unavailable", status=503)
    return services.media


def _not_found(media_id: str) -> RequestError:
    return RequestError(
        f"media {media_id!r} does not exist", param="media_id", code="not_found", status=404
    )


def _gone(e: MediaFileError) -> RequestError:
    return RequestError(str(e), param="media_id", code="media_file_gone", status=410)


def _save(media: MediaStore, data: bytes, services: Services, tenant: str) -> dict[str, Any]:
    record = media.save(data, image_limits(services.settings), tenant, owned=True)
    return media_json(record, image_size(data))


IMAGE_CONTENT = {t: {} for t in ("image/png", "image/jpeg", "image/webp", "image/gif")}
# The body is read as it streams (app/api/kvchat/media_upload.py), so it is described here by hand.
UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            **{t: {"schema": {"type": "string", "format": "binary"}} for t in IMAGE_CONTENT},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
        },
    }
}


MEDIA_LINKS = openapi_links(
    "media_id",
    {
        "GetMedia": "get_media_v1_media__media_id__get",
        "GetMediaContent": "get_media_content_v1_media__media_id__content_get",
        "DeleteMedia": "delete_media_v1_media__media_id__delete",
    },
)


@router.post(
    "", status_code=201, openapi_extra=UPLOAD_BODY, responses={201: {"links": MEDIA_LINKS}}
)
async def upload_media(request: Request, services: ServicesDep) -> JSONResponse:
    media = _media(services)
    limit = image_limits(services.settings).max_bytes
    data = await read_upload(
        request.headers.get("content-type"),
        request.headers.get("content-length"),
        request.stream(),
        limit,
    )
    try:
        # Decoding, hashing and the write block: off the event loop, in the images pool.
        body = await services.pools.images.run(_save, media, data, services, tenant_of(request))
    except ImageError as e:
        raise RequestError(str(e), param=FILE_FIELD, code="invalid_image") from None
    return JSONResponse(body, status_code=201)


def _read(media: MediaStore, media_id: str, tenant: str) -> tuple[MediaRecord, bytes]:
    stored = media.read(media_id, tenant)
    return stored.record, stored.data


async def _load(services: Services, media_id: str, tenant: str) -> tuple[MediaRecord, bytes]:
    # Another tenant's media is "not found", never "forbidden": its existence is not told.
    try:
        return await asyncio.to_thread(_read, _media(services), media_id, tenant)
    except KeyError:
        raise _not_found(media_id) from None
    except MediaFileError as e:
        raise _gone(e) from None


@router.get("/{media_id}")
async def get_media(media_id: str, request: Request, services: ServicesDep) -> dict[str, Any]:
    # The file is read (and its hash checked) so the answer says whether it can still be used,
    # and the size is taken from it: the table has no width or height columns.
    record, data = await _load(services, media_id, tenant_of(request))
    return media_json(record, await services.pools.images.run(image_size, data))


@router.get("/{media_id}/content", responses={200: {"content": IMAGE_CONTENT}})
async def get_media_content(media_id: str, request: Request, services: ServicesDep) -> Response:
    record, data = await _load(services, media_id, tenant_of(request))
    headers = {
        "ETag": f'"{record.sha256}"',
        # Content-addressed: the bytes behind an id never change.
        "Cache-Control": "private, max-age=31536000, immutable",
    }
    return Response(data, media_type=record.mime_type, headers=headers)


@router.delete("/{media_id}")
async def delete_media(media_id: str, request: Request, services: ServicesDep) -> dict[str, Any]:
    """The caller's upload goes; the file itself when no message of the tenant's sessions uses
    it any more."""
    media = _media(services)
    if not await asyncio.to_thread(media.release, media_id, tenant_of(request)):
        raise _not_found(media_id)
    return {"id": media_id, "object": "media.deleted", "deleted": True}
