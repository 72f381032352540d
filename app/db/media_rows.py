"""`MediaRows`: the Store's media rows, who may see them, and what frees them.

A media row is visible to a tenant that uploaded it (`media_owners`) or whose sessions' messages
use it (`message_media`); it is freed (row deleted, file the caller's to remove) when neither
holds it any more. Its bytes are in `media_bytes`, written in the transaction that writes the row
(so every replica that sees the row can read them) and deleted with it (ON DELETE CASCADE).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import delete, exists, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import (
    Conversation,
    MediaAsset,
    MediaBytes,
    MediaOwner,
    Message,
    MessageMedia,
    media_id,
    utcnow,
)
from app.db.records import MediaRecord, media_record

_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_text(name: str, value: str | None) -> None:
    # PostgreSQL text cannot hold NUL; refuse it on every backend so both behave alike.
    if value is not None and (not isinstance(value, str) or "\x00" in value):
        raise ValueError(f"{name} must be a string without NUL characters")


def media_ids_of(content: Any) -> list[str]:
    """The uploaded media a message's content parts refer to (`image_file` parts)."""
    if not isinstance(content, list):
        return []
    out = []
    for part in content:
        ref = part.get("image_file") if part.get("type") == "image_file" else None
        if isinstance(ref, dict) and isinstance(ref.get("file_id"), str):
            out.append(ref["file_id"])
    return out


def link_media(s: Session, message: Message, tenant_id: str | None = None) -> None:
    """Count the uploads a (flushed) message's parts refer to as used by it; ids without a row
    are left out, and with `tenant_id` so are uploads that tenant cannot see (an imported
    conversation must not reach another tenant's media by naming it)."""
    refs = set(media_ids_of(message.content))
    if not refs:
        return
    known = set(s.scalars(select(MediaAsset.id).where(MediaAsset.id.in_(refs))))
    if tenant_id is not None:
        known = {m for m in known if _visible(s, m, tenant_id)}
    s.add_all(MessageMedia(message_id=message.id, media_id=m) for m in known)


def _visible(s: Session, media_id: str, tenant_id: str) -> bool:
    """The tenant uploaded the media, or a message of one of its sessions uses it."""
    owner = exists().where(MediaOwner.media_id == media_id, MediaOwner.tenant_id == tenant_id)
    used = (
        exists()
        .where(MessageMedia.media_id == media_id)
        .where(MessageMedia.message_id == Message.id)
        .where(Message.session_id == Conversation.id)
        .where(Conversation.tenant_id == tenant_id)
    )
    return bool(s.scalar(select(owner | used)))


def _put_bytes(s: Session, media_id: str, data: bytes) -> None:
    """Store data as the row's bytes unless the same bytes are there already."""
    stored = s.get(MediaBytes, media_id)
    if stored is None:
        s.add(MediaBytes(media_id=media_id, data=data))
    elif bytes(stored.data) != data:
        stored.data = data


class MediaRows:
    """Mixed into Store (which provides `_tx`)."""

    _tx: Callable[..., AbstractContextManager[Session]]

    @staticmethod
    def _free_unused(s: Session, media_ids: Iterable[str]) -> list[MediaRecord]:
        """Delete the media rows among media_ids that no tenant owns and no message uses."""
        freed = []
        for mid in sorted(media_ids):
            owned = exists().where(MediaOwner.media_id == mid)
            used = exists().where(MessageMedia.media_id == mid)
            asset = s.scalar(select(MediaAsset).where(MediaAsset.id == mid, ~owned, ~used))
            if asset is not None:
                freed.append(media_record(asset))
                s.delete(asset)
        return freed

    def add_media(
        self,
        sha256: str,
        mime_type: str,
        size: int,
        location: str,
        owner: str | None = None,
        data: bytes | None = None,
    ) -> MediaRecord:
        """Record a media file; the same sha256 again returns the first record unchanged.
        owner: the tenant that uploaded it (kept until it deletes it). data: its bytes, stored
        with the row; for a known row they replace stored bytes that are missing or differ
        (uploading the same image again repairs it)."""
        record = self._add_media(sha256, mime_type, size, location, data)
        if owner is not None:
            with self._tx(write=True) as s:
                if s.get(MediaOwner, (owner, record.id)) is None:
                    s.add(MediaOwner(tenant_id=owner, media_id=record.id, created_at=utcnow()))
        return record

    def _add_media(
        self, sha256: str, mime_type: str, size: int, location: str, data: bytes | None
    ) -> MediaRecord:
        sha256 = sha256.lower()
        if not _SHA256.fullmatch(sha256):
            raise ValueError("sha256 must be 64 hex digits")
        if size < 0:
            raise ValueError("size must be >= 0")
        check_text("mime_type", mime_type)
        check_text("location", location)
        try:
            with self._tx(write=True) as s:
                found = s.scalar(select(MediaAsset).where(MediaAsset.sha256 == sha256))
                if found is not None:
                    if data is not None:
                        _put_bytes(s, found.id, data)
                    return media_record(found)
                asset = MediaAsset(
                    id=media_id(sha256),
                    sha256=sha256,
                    mime_type=mime_type,
                    size=size,
                    location=location,
                    created_at=utcnow(),
                )
                s.add(asset)
                s.flush()
                if data is not None:
                    s.add(MediaBytes(media_id=asset.id, data=data))
                return media_record(asset)
        except IntegrityError:
            # PostgreSQL: another transaction inserted the same file between our SELECT and
            # INSERT. Its record is the one to return.
            found_record = self.get_media_by_sha256(sha256)
            if found_record is None:
                raise
            return found_record

    def get_media(self, media_id: str, tenant_id: str | None = None) -> MediaRecord | None:
        """None if unknown, or if tenant_id (unless None) neither uploaded it nor uses it in a
        message of its sessions."""
        with self._tx() as s:
            asset = s.get(MediaAsset, media_id)
            if asset is None or (tenant_id is not None and not _visible(s, media_id, tenant_id)):
                return None
            return media_record(asset)

    def release_media(self, media_id: str, tenant_id: str) -> tuple[bool, MediaRecord | None]:
        """The tenant gives up its upload of media_id: (whether the tenant could see it, the
        media row freed because nothing uses it any more, or None)."""
        with self._tx(write=True) as s:
            if s.get(MediaAsset, media_id) is None or not _visible(s, media_id, tenant_id):
                return False, None
            s.execute(
                delete(MediaOwner).where(
                    MediaOwner.media_id == media_id, MediaOwner.tenant_id == tenant_id
                )
            )
            freed = self._free_unused(s, [media_id])
            return True, freed[0] if freed else None

    def get_media_bytes(self, media_id: str) -> bytes | None:
        """The stored bytes of a media row; None if it has none (an upload from before
        migration 0004 that no server has copied in yet)."""
        with self._tx() as s:
            return s.scalar(select(MediaBytes.data).where(MediaBytes.media_id == media_id))

    def media_without_bytes(self) -> list[MediaRecord]:
        """Media rows whose bytes are still only in some server's media directory."""
        has_bytes = exists().where(MediaBytes.media_id == MediaAsset.id)
        with self._tx() as s:
            return [media_record(a) for a in s.scalars(select(MediaAsset).where(~has_bytes))]

    def get_media_by_sha256(self, sha256: str) -> MediaRecord | None:
        with self._tx() as s:
            asset = s.scalar(select(MediaAsset).where(MediaAsset.sha256 == sha256.lower()))
            return None if asset is None else media_record(asset)
