"""MediaStore on a real SQLite Store: bytes in the database by sha256, idempotent saves, verified
reads, older uploads' files copied in."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image
from sqlalchemy import delete, func, select, update

from app.db.models import MediaBytes, media_id
from app.db.store import Store
from app.media.media_store import MediaFileError, MediaStore, image_limits, image_size
from mm.image import ImageError, ImageLimits
from tests.db_urls import migrated_store


def png(width: int = 16, height: int = 8, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    with migrated_store("sqlite", tmp_path) as s:
        yield s


@pytest.fixture()
def media(tmp_path: Path, store: Store) -> MediaStore:
    return MediaStore(tmp_path / "media", store)


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def stored_bytes(store: Store) -> dict[str, bytes]:
    with store.transaction() as s:
        return {m: bytes(d) for m, d in s.execute(select(MediaBytes.media_id, MediaBytes.data))}


def set_bytes(store: Store, media_id: str, data: bytes | None) -> None:
    """Damage (or, with None, drop) a row's stored bytes, as a disk fault or an old row would."""
    with store.transaction(write=True) as s:
        if data is None:
            s.execute(delete(MediaBytes).where(MediaBytes.media_id == media_id))
        else:
            s.execute(update(MediaBytes).where(MediaBytes.media_id == media_id).values(data=data))


def test_save_is_idempotent_one_copy_one_record_and_no_file(media: MediaStore, store: Store):
    data = png()
    first = media.save(data)
    second = media.save(data)
    assert first == second
    assert first.id == media_id(first.sha256, "")  # the open server's tenant
    assert (first.mime_type, first.size) == ("image/png", len(data))
    assert stored_bytes(store) == {first.id: data}
    assert files(media.root) == []  # every replica reads the database, none a directory
    assert first.location == f"{first.sha256[:2]}/{first.sha256}.png"  # relative: the dir can move
    assert media.save(png(color=(0, 0, 255))).id != first.id
    theirs = media.save(data, tenant="bob", owned=True)
    assert theirs.id == media_id(first.sha256, "bob") != first.id
    with pytest.raises(KeyError):
        media.get(theirs.id, tenant_id="")
    assert media.get(theirs.id, tenant_id="bob") == theirs


def test_load_round_trip(media: MediaStore):
    data = png(5, 7)
    record = media.save(data)
    assert media.load(record.id) == data
    stored = media.read(record.id)
    assert stored.record == record and stored.data == data
    assert media.get(record.id) == record


def test_jpeg_gets_its_own_extension(media: MediaStore):
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(buf, "JPEG")
    record = media.save(buf.getvalue())
    assert record.mime_type == "image/jpeg" and record.location.endswith(".jpg")


def test_corrupt_bytes_are_detected_and_a_new_upload_repairs_them(media: MediaStore, store: Store):
    data = png()
    record = media.save(data)
    set_bytes(store, record.id, data[:-3] + b"xyz")
    with pytest.raises(MediaFileError, match="corrupt"):
        media.load(record.id)
    assert media.save(data) == record  # same bytes again: the damaged copy is rewritten
    assert media.load(record.id) == data


def test_missing_bytes_are_detected_and_a_new_upload_stores_them(media: MediaStore, store: Store):
    data = png()
    record = media.save(data)
    set_bytes(store, record.id, None)
    with pytest.raises(MediaFileError, match="missing"):
        media.load(record.id)
    assert issubclass(MediaFileError, ValueError)
    assert media.save(data) == record
    assert media.load(record.id) == data


def test_older_uploads_files_are_copied_in_when_they_hash_right(media: MediaStore, store: Store):
    """Rows from before the bytes moved into the database: their files are imported once."""
    good, bad, gone = png(color=(1, 2, 3)), png(color=(4, 5, 6)), png(color=(7, 8, 9))
    records = [media.save(d) for d in (good, bad, gone)]
    for record, data in zip(records, (good, bad[:-1] + b"!", None), strict=True):
        set_bytes(store, record.id, None)
        if data is not None:
            (media.root / record.location).parent.mkdir(parents=True, exist_ok=True)
            (media.root / record.location).write_bytes(data)
    assert media.import_files() == 1
    assert media.load(records[0].id) == good
    for record in records[1:]:  # a damaged file is not imported; a missing one cannot be
        with pytest.raises(MediaFileError, match="missing"):
            media.load(record.id)
    assert media.import_files() == 0  # nothing left this server can copy
    with store.transaction() as s:
        assert s.scalar(select(func.count()).select_from(MediaBytes)) == 1


@pytest.mark.parametrize(
    "media_id", ["", "media-", "media-XYZ", "media-" + "a" * 23, "media-" + "A" * 24, "../etc"]
)
def test_malformed_id_is_unknown_without_asking_the_database(media: MediaStore, media_id: str):
    media.store = None  # type: ignore[assignment]  # any database call would fail loudly
    with pytest.raises(KeyError):
        media.load(media_id)


def test_unknown_id(media: MediaStore):
    with pytest.raises(KeyError):
        media.load("media-" + "0" * 24)


def test_bad_images_are_refused_and_nothing_is_written(media: MediaStore):
    bmp = io.BytesIO()
    Image.new("RGB", (4, 4)).save(bmp, "BMP")
    for data, reason in [
        (b"hello, not an image", "not an image"),
        (bmp.getvalue(), "BMP"),
        (png(64, 64)[:60], "corrupt or truncated|not an image"),
        (b"", "empty"),
    ]:
        with pytest.raises(ImageError, match=reason):
            media.save(data)
    with pytest.raises(ImageError, match="limit"):
        media.save(png(64, 64), ImageLimits(max_pixels=100))
    assert files(media.root) == []


def test_image_limits_read_settings_when_they_have_the_fields():
    assert image_limits(SimpleNamespace()) == ImageLimits()
    assert image_limits(SimpleNamespace(image_max_bytes=None)) == ImageLimits()
    limits = image_limits(
        SimpleNamespace(image_max_bytes=1000, image_max_pixels=50, allow_remote_images=True)
    )
    assert limits == ImageLimits(max_bytes=1000, max_pixels=50, allow_remote=True)


def test_image_size_applies_exif_orientation():
    assert image_size(png(16, 8)) == (16, 8)
    im = Image.new("RGB", (16, 8))
    exif = im.getexif()
    exif[0x0112] = 6  # rotated 90 degrees: the model sees 8x16
    buf = io.BytesIO()
    im.save(buf, "JPEG", exif=exif)
    assert image_size(buf.getvalue()) == (8, 16)
