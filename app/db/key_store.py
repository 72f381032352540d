"""API keys: created and revoked from the command line, looked up by the server per request.

A key is 32 random bytes (URL-safe base64) after a "kvc-" prefix; only its sha256 is stored.
The key has 256 bits of entropy, so a plain (unsalted, fast) hash is enough: nobody can guess
a key from its hash, and the lookup is one indexed equality.

Keys fail closed: a database that holds any key, live or revoked, makes the server keyed, so
revoking the last key refuses everyone (it never opens the server). Only `open_server`, an
admin's deliberate act (`python -m app keys open`), removes the revoked keys and with them the
last trace of keys: then the server is open again.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, or_, select

from app.db.models import ApiKey, utcnow
from app.db.store import Store

KEY_PREFIX = "kvc-"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(slots=True)
class ApiKeyRecord:
    id: str
    name: str
    tenant_id: str
    admin: bool
    created_at: datetime
    revoked_at: datetime | None


@dataclass(slots=True, frozen=True)
class KeysState:
    """What the database says about access: `keyed` while any key exists (revoked ones too),
    `live` while one of them can still be used."""

    keyed: bool
    live: bool


class LiveKeysError(ValueError):
    """The server cannot be opened while a key still works: revoke them first."""


def _record(k: ApiKey) -> ApiKeyRecord:
    return ApiKeyRecord(k.id, k.name, k.tenant_id, k.admin, k.created_at, k.revoked_at)


class KeyStore:
    def __init__(self, store: Store) -> None:
        self._store = store

    def create(
        self, name: str, tenant_id: str | None = None, admin: bool = False
    ) -> tuple[ApiKeyRecord, str]:
        """A new key of tenant_id (default: the name); returns its record and the key itself,
        which is shown this once and never stored."""
        if not name or len(name) > 200 or "\x00" in name:
            raise ValueError("the name must be 1-200 characters")
        tenant = name if tenant_id is None else tenant_id
        if not tenant or len(tenant) > 64 or "\x00" in tenant:
            raise ValueError("the tenant must be 1-64 characters")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        row = ApiKey(
            id="key-" + secrets.token_hex(6),
            name=name,
            tenant_id=tenant,
            key_hash=key_hash(key),
            admin=admin,
            created_at=utcnow(),
        )
        with self._store.transaction(write=True) as s:
            s.add(row)
        return _record(row), key

    def list(self) -> list[ApiKeyRecord]:
        with self._store.transaction() as s:
            return [_record(k) for k in s.scalars(select(ApiKey).order_by(ApiKey.created_at))]

    def revoke(self, id_or_name: str) -> list[ApiKeyRecord]:
        """Revoke the key with this id, or every live key with this name; returns them."""
        with self._store.transaction(write=True) as s:
            found = list(
                s.scalars(
                    select(ApiKey).where(
                        or_(ApiKey.id == id_or_name, ApiKey.name == id_or_name),
                        ApiKey.revoked_at.is_(None),
                    )
                )
            )
            for k in found:
                k.revoked_at = utcnow()
            return [_record(k) for k in found]

    def lookup(self, key: str) -> ApiKeyRecord | None:
        """The live key's record, or None (unknown or revoked)."""
        with self._store.transaction() as s:
            row = s.scalar(select(ApiKey).where(ApiKey.key_hash == key_hash(key)))
            return None if row is None or row.revoked_at is not None else _record(row)

    def any_live(self) -> bool:
        with self._store.transaction() as s:
            return (
                s.scalar(select(ApiKey.id).where(ApiKey.revoked_at.is_(None)).limit(1)) is not None
            )

    def state(self) -> KeysState:
        """Whether the server is keyed (any key, revoked too) and whether a key is live."""
        with self._store.transaction() as s:
            keyed = s.scalar(select(ApiKey.id).limit(1)) is not None
            live = keyed and (
                s.scalar(select(ApiKey.id).where(ApiKey.revoked_at.is_(None)).limit(1)) is not None
            )
            return KeysState(keyed, live)

    def open_server(self) -> list[ApiKeyRecord]:
        """Remove every (revoked) key, so that the server serves without keys; returns them.
        LiveKeysError while a key is live: opening is never a side effect of anything else."""
        with self._store.transaction(write=True) as s:
            found = list(s.scalars(select(ApiKey).order_by(ApiKey.created_at)))
            live = [k.id for k in found if k.revoked_at is None]
            if live:
                raise LiveKeysError(
                    f"{len(live)} keys are live ({', '.join(live)}): revoke them first"
                )
            # Only the keys seen: one created meanwhile is live and stays.
            s.execute(delete(ApiKey).where(ApiKey.id.in_([k.id for k in found])))
            return [_record(k) for k in found]
