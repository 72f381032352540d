"""Uploaded media: files on disk named by their sha256, one row each in the media table.

A file is written before its row, atomically (a temp file in the same directory, then
os.replace), so a crash leaves at worst an orphan file that the next upload of the same bytes
reuses, never a row pointing at half a file. The file is named by the hash of its bytes (what
the client sent, kept as is); the pixel hash that the KV cache compares is mm/image.py's job.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import ExifTags, Image

from app.db.records import MediaRecord
from app.db.store import Store
from mm.image import ImageLimits, decode_image

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
        self, data: bytes, limits: ImageLimits = DEFAULT_LIMITS, owner: str | None = None
    ) -> MediaRecord:
        """Store an image (ImageError if it is not one this server takes); the same bytes
        again give the same record and the same single file. owner: the uploading tenant
        (None: kept only while a message uses it)."""
        decoded = decode_image(data, limits)  # validate before anything is written
        sha = hashlib.sha256(data).hexdigest()
        rel = f"{sha[:2]}/{sha}{EXTENSIONS[decoded.mime_type]}"
        path = self.root / rel
        # An existing file is trusted only if it still hashes right: a damaged one is rewritten,
        # so uploading the bytes again is how a corrupt file is repaired.
        if not (path.is_file() and _sha256_of(path) == sha):
            _write_atomic(path, data)
        return self.store.add_media(sha, decoded.mime_type, len(data), rel, owner)

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
        """Record and verified bytes; KeyError if unknown, MediaFileError if the file is
        missing or does not match its recorded sha256."""
        record = self.get(media_id, tenant_id)
        path = self._path(record)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise MediaFileError(
                f"the file of {media_id} is missing ({e.strerror}); upload the image again"
            ) from None
        if hashlib.sha256(data).hexdigest() != record.sha256:
            raise MediaFileError(
                f"the file of {media_id} is corrupt (its sha256 no longer matches); "
                "upload the image again"
            )
        return StoredMedia(record, data)

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
        """Delete the files of media rows the store has freed."""
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


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as the target: os.replace is atomic only within one file system.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
