"""Persistence: chat sessions, their messages and stored media, in SQLite or PostgreSQL; the
documents' tables in documents/, what replicas share in replicas/.

`Store(url)` is the whole interface (app/db/store.py); it returns plain records
(app/db/records.py). The schema comes from Alembic migrations (migrations/), applied by
`Store.migrate()` on every start.
"""

from __future__ import annotations

from app.db.records import MediaRecord, MessageRecord, SessionRecord
from app.db.store import Store

__all__ = ["MediaRecord", "MessageRecord", "SessionRecord", "Store"]
