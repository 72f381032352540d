"""Uploaded media: one row each in the media table, the bytes beside it in the database.

The bytes are in the database, not in a server's data directory, so that every replica behind a
load balancer reads every upload (docs/deployment.md says why not a shared directory): the row
and its bytes commit together, so no replica ever sees a row without its bytes, and freeing a
row frees its bytes in the same transaction. A row is a tenant's, keyed by the tenant and the
hash of its bytes (what the client sent, kept as is: app/db/models.py `media_id`); the pixel hash
that the KV and encoder caches compare, under the tenant's salt, is mm/image.py's job.

Uploads from before the bytes moved into the database (migration 0004) are files under the
media directory, named by their sha256: `import_files` copies the ones this server has into the
database at start-up.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import ExifTags, Image

from app.db.records import MediaRecord
from app.db.store import Store
from mm.image import ImageLimits, decode_image

log = logging.getLogger(__name__)
EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif"}
MEDIA_ID = re.compile(r"media-[0-9a-f]{24}")
DEFAULT_LIMITS = ImageLimits()


class MediaFileError(ValueError):
    """A known media id whose file is missing or no longer has the recorded sha256."""


@dataclass(slots=True)
class StoredMedia:
    record: MediaRecord
    data: bytes


def image_limits(settings: Any) -> ImageLimits:
    """Limits from the settings; fields the settings do not have (yet) keep their defaults."""
    default = ImageLimits()

    def pick(name: str, fallback: Any) -> Any:
        value = getattr(settings, name, None)
        return fallback if value is None else value

    return ImageLimits(
        max_bytes=int(pick("image_max_bytes", default.max_bytes)),
        max_pixels=int(pick("image_max_pixels", default.max_pixels)),
        allow_remote=bool(pick("allow_remote_images", default.allow_remote)),
        media_path=pick("media_path", default.media_path),
    )


def media_root(settings: Any) -> Path:
    return Path(settings.data_dir) / "media"


def image_size(data: bytes) -> tuple[int, int]:
    """Width and height as the model sees the image (EXIF orientation applied, as decode_image
    does), read from the header only: no pixel is decoded."""
    with Image.open(io.BytesIO(data)) as im:
        width, height = im.size
        orientation = im.getexif().get(ExifTags.Base.Orientation, 1)
    # Orientations 5-8 are a transpose or a quarter turn: width and height swap.
    return (height, width) if orientation in (5, 6, 7, 8) else (width, height)


class MediaStore:
    def __init__(self, root: Path, store: Store) -> None:
        self.root = Path(root)
        self.store = store

    def save(
        self,
        data: bytes,
        limits: ImageLimits = DEFAULT_LIMITS,
        tenant: str = "",
        owned: bool = False,
    ) -> MediaRecord:
        """Store an image of the tenant (ImageError if it is not one this server takes); the
        same bytes again give the tenant the same record, stored once (and repaired if the
        stored copy was damaged); another tenant's same bytes are a record of its own. owned:
        the tenant uploaded it (else kept only while a message uses it)."""
        decoded = decode_image(data, limits)  # validate before anything is written
        sha = hashlib.sha256(data).hexdigest()
        rel = f"{sha[:2]}/{sha}{EXTENSIONS[decoded.mime_type]}"
        return self.store.add_media(
            sha, decoded.mime_type, len(data), rel, tenant, owned=owned, data=data
        )

    def get(self, media_id: str, tenant_id: str | None = None) -> MediaRecord:
        """The record of a media id; KeyError if malformed, unknown, or not visible to
        tenant_id (unless None)."""
        # A malformed id can never be in the table: no need to ask the database.
        if not isinstance(media_id, str) or not MEDIA_ID.fullmatch(media_id):
            raise KeyError(media_id)
        record = self.store.get_media(media_id, tenant_id)
        if record is None:
            raise KeyError(media_id)
        return record

    def read(self, media_id: str, tenant_id: str | None = None) -> StoredMedia:
        """Record and verified bytes; KeyError if unknown, MediaFileError if its bytes are
        missing or do not match its recorded sha256."""
        record = self.get(media_id, tenant_id)
        data = self.store.get_media_bytes(record.id)
        if data is None:
            raise MediaFileError(
                f"the file of {media_id} is missing (an upload from before the database held "
                "media, and no server has copied its file in); upload the image again"
            )
        if hashlib.sha256(data).hexdigest() != record.sha256:
            raise MediaFileError(
                f"the file of {media_id} is corrupt (its sha256 no longer matches); "
                "upload the image again"
            )
        return StoredMedia(record, data)

    def import_files(self) -> int:
        """Copy into the database the bytes of older uploads whose file this server has (and
        that still hash right); how many were copied. Safe on every replica at once."""
        copied = 0
        for record in self.store.media_without_bytes():
            with suppress(OSError, MediaFileError):
                data = self._path(record).read_bytes()
                if hashlib.sha256(data).hexdigest() == record.sha256:
                    self.store.put_media_bytes(record.id, data)
                    copied += 1
        if copied:
            log.info("copied %d media files from %s into the database", copied, self.root)
        return copied

    def load(self, media_id: str, tenant_id: str | None = None) -> bytes:
        return self.read(media_id, tenant_id).data

    def release(self, media_id: str, tenant_id: str) -> bool:
        """The tenant deletes its upload; the file goes when nothing uses it any more.
        False if the tenant cannot see it."""
        if not MEDIA_ID.fullmatch(media_id):
            return False
        seen, freed = self.store.release_media(media_id, tenant_id)
        self.remove_files([freed] if freed is not None else [])
        return seen

    def remove_files(self, freed: list[MediaRecord]) -> None:
        """Delete the files (older uploads) of media rows the store has freed; their bytes in
        the database went with the rows."""
        for record in freed:
            with suppress(OSError, MediaFileError):
                self._path(record).unlink(missing_ok=True)

    def _path(self, record: MediaRecord) -> Path:
        # The location comes from our own table, but a row edited by hand must still not make
        # the server read outside its media directory.
        root = self.root.resolve()
        path = (root / record.location).resolve()
        if not path.is_relative_to(root):
            raise MediaFileError(f"the file of {record.id} is outside the media directory")
        return path
