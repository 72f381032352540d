"""A tenant's session by id, and the 404 that answers when there is none.

Another tenant's session is "not found", never "forbidden": its existence is not told.
"""

from __future__ import annotations

import asyncio
import re

from app.db.records import SessionRecord
from app.db.store import Store
from app.engine.request import RequestError

_SESSION_ID = re.compile(r"[0-9a-f]{32}")


def session_not_found(session_id: str) -> RequestError:
    return RequestError(
        f"session {session_id!r} does not exist", param="session_id", code="not_found", status=404
    )


def valid_session_id(session_id: str) -> bool:
    """False for what is never a session id (no need to ask the database)."""
    return _SESSION_ID.fullmatch(session_id) is not None


async def load_session(store: Store, session_id: str, tenant: str) -> SessionRecord:
    """The tenant's session with its messages."""
    if not valid_session_id(session_id):
        raise session_not_found(session_id)
    session = await asyncio.to_thread(store.get_session, session_id, True, tenant)
    if session is None:
        raise session_not_found(session_id)
    return session


async def check_session(store: Store, session_id: str, tenant: str) -> None:
    """A chat's session_id must name a session of the caller's tenant (POST /v1/sessions)."""
    found = await asyncio.to_thread(store.get_session, session_id, False, tenant)
    if found is None:
        raise RequestError(
            f"session {session_id!r} does not exist; create one with POST /v1/sessions",
            param="session_id",
            code="not_found",
            status=404,
        )
