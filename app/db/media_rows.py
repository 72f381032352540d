"""`MediaRows`: the Store's media rows, who may see them, and what frees them.

A media row belongs to one tenant: its id is derived from the tenant and the bytes
(`media_id`), and only that tenant sees it, so another tenant's upload of the same image is a
row of its own and nothing (its id, its `created_at`, whether it exists) crosses over. Rows from
before migration 0010 (`legacy_media_id`) are visible to a tenant that uploaded them
(`media_owners`) or whose sessions' messages use them (`message_media`). A message links only
media its session's tenant sees. A row is freed (row deleted, file the caller's to remove) when
no upload and no message holds it any more. Its bytes are in `media_bytes`, written in the
transaction that writes the row (so every replica that sees the row can read them) and deleted
with it (ON DELETE CASCADE).
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
    legacy_media_id,
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


class MediaNotVisible(KeyError):
    """A message names media its tenant cannot see: unknown, or another tenant's."""

    def __init__(self, index: int, media_id: str) -> None:
        super().__init__(media_id)
        self.index, self.media_id = index, media_id


def link_media(s: Session, message: Message, tenant_id: str) -> None:
    """Count the uploads a (flushed) message's parts refer to as used by it: only those its
    tenant can see, so naming another tenant's media never reaches it (ids without a row, or
    another's, are left out)."""
    refs = set(media_ids_of(message.content))
    if refs:
        known = {m for m in refs if visible(s, m, tenant_id)}
        s.add_all(MessageMedia(message_id=message.id, media_id=m) for m in known)


def visible(s: Session, mid: str, tenant_id: str) -> bool:
    """The row exists and is the tenant's: its id is the tenant's id for its bytes, or (a row
    from before migration 0010) the tenant uploaded it or a message of its sessions uses it."""
    asset = s.get(MediaAsset, mid)
    if asset is None:
        return False
    if asset.id == media_id(asset.sha256, tenant_id):
        return True
    if asset.id != legacy_media_id(asset.sha256):
        return False  # another tenant's
    owner = exists().where(MediaOwner.media_id == mid, MediaOwner.tenant_id == tenant_id)
    used = (
        exists()
        .where(MessageMedia.media_id == mid)
        .where(MessageMedia.message_id == Message.id)
        .where(Message.session_id == Conversation.id)
        .where(Conversation.tenant_id == tenant_id)
    )
    return bool(s.scalar(select(owner | used)))


def unseen_media(s: Session, contents: list[Any], tenant_id: str) -> MediaNotVisible | None:
    """The first media id that a content of `contents` names and the tenant cannot see."""
    for i, content in enumerate(contents):
        for mid in media_ids_of(content):
            if not visible(s, mid, tenant_id):
                return MediaNotVisible(i, mid)
    return None


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
        tenant_id: str = "",
        owned: bool = False,
        data: bytes | None = None,
    ) -> MediaRecord:
        """Record a media file of the tenant; the same sha256 again returns the tenant's first
        record unchanged. owned: the tenant uploaded it (kept until it deletes it; else only
        while a message uses it). data: its bytes, stored with the row; for a known row they
        replace stored bytes that are missing or differ (uploading the same image again
        repairs it)."""
        record = self._add_media(sha256, mime_type, size, location, tenant_id, data)
        if owned:
            with self._tx(write=True) as s:
                if s.get(MediaOwner, (tenant_id, record.id)) is None:
                    s.add(MediaOwner(tenant_id=tenant_id, media_id=record.id, created_at=utcnow()))
        return record

    def _add_media(
        self,
        sha256: str,
        mime_type: str,
        size: int,
        location: str,
        tenant_id: str,
        data: bytes | None,
    ) -> MediaRecord:
        sha256 = sha256.lower()
        if not _SHA256.fullmatch(sha256):
            raise ValueError("sha256 must be 64 hex digits")
        if size < 0:
            raise ValueError("size must be >= 0")
        check_text("mime_type", mime_type)
        check_text("location", location)
        mid = media_id(sha256, tenant_id)
        try:
            with self._tx(write=True) as s:
                found = s.get(MediaAsset, mid)
                if found is not None:
                    if data is not None:
                        _put_bytes(s, found.id, data)
                    return media_record(found)
                asset = MediaAsset(
                    id=mid,
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
            found_record = self.get_media(mid)
            if found_record is None:
                raise
            return found_record

    def get_media(self, media_id: str, tenant_id: str | None = None) -> MediaRecord | None:
        """None if unknown, or if tenant_id (unless None) cannot see it (`visible`)."""
        with self._tx() as s:
            asset = s.get(MediaAsset, media_id)
            if asset is None or (tenant_id is not None and not visible(s, media_id, tenant_id)):
                return None
            return media_record(asset)

    def release_media(self, media_id: str, tenant_id: str) -> tuple[bool, MediaRecord | None]:
        """The tenant gives up its upload of media_id: (whether the tenant could see it, the
        media row freed because nothing uses it any more, or None)."""
        with self._tx(write=True) as s:
            if not visible(s, media_id, tenant_id):
                return False, None
            s.execute(
                delete(MediaOwner).where(
                    MediaOwner.media_id == media_id, MediaOwner.tenant_id == tenant_id
                )
            )
            freed = self._free_unused(s, [media_id])
            return True, freed[0] if freed else None

    def put_media_bytes(self, media_id: str, data: bytes) -> None:
        """Store the bytes of a known row (an upload from before the database held media)."""
        with self._tx(write=True) as s:
            if s.get(MediaAsset, media_id) is not None:
                _put_bytes(s, media_id, data)

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
