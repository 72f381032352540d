"""`SessionWrites`: what a turn of a stored session writes before it generates, and the hold
that lets one turn of a session run at a time.

A turn's new messages (a user message; for the Responses API also tool results and earlier
assistant turns sent as input) are stored before generation, holding the session's turn: a
second turn at once would store messages out of order (409 while one runs). The hold is let go
when the turn ends (`release`, an end hook) or, for a turn refused before generation, by
`undo`, which also deletes what was stored, as if the turn was never sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.chat.sessions.session_lookup import session_not_found
from app.chat.turn import TurnResult
from app.db.records import MessageRecord
from app.db.store import Store
from app.engine.request import RequestError

Content = str | list[dict[str, Any]]  # a message's content as the database stores it


@dataclass(slots=True)
class NewMessage:
    """A message a turn adds to its session, as it is stored."""

    role: str
    content: Content
    tool_calls: list[dict[str, Any]] | None = None  # an assistant turn's: id, name, arguments
    tool_call_id: str | None = None  # a tool result's


@dataclass(frozen=True, slots=True)
class Hold:
    """What the 409 of a session whose turn is taken names: the request's field, and why."""

    param: str
    what: str


class SessionWrites:
    def __init__(self, store: Store) -> None:
        self.store = store
        # Sessions with a turn in flight: a second turn at once would store messages out of order.
        self.busy: set[str] = set()

    def hold(self, session_id: str, hold: Hold) -> None:
        """Take the session's turn; 409 while another turn of it runs."""
        if session_id in self.busy:
            raise RequestError(
                f"{hold.what}; wait for it or cancel it first",
                param=hold.param,
                code="session_busy",
                status=409,
            )
        self.busy.add(session_id)

    async def store_new(
        self,
        session_id: str,
        messages: list[NewMessage],
        hold: Hold,
        replace_from: int | None = None,
    ) -> list[MessageRecord]:
        """Store the new messages, holding the session's turn; with `replace_from`, the
        messages from that seq on are replaced by them (regenerate)."""
        self.hold(session_id, hold)
        stored: list[MessageRecord] = []
        try:
            for m in messages:
                replace, replace_from = replace_from, None  # the first message replaces
                stored.append(
                    await asyncio.to_thread(
                        self.store.add_message,
                        session_id,
                        m.role,
                        m.content,
                        replace_from=replace,
                        tool_calls=m.tool_calls,
                        tool_call_id=m.tool_call_id,
                    )
                )
            return stored
        except KeyError:  # deleted meanwhile
            self.busy.discard(session_id)
            raise session_not_found(session_id) from None
        except BaseException:
            self.busy.discard(session_id)
            raise

    def undo(self, session_id: str, stored: list[MessageRecord]) -> Callable[[], Awaitable[None]]:
        """For a turn refused before generation: its messages deleted, the hold let go."""

        async def undo() -> None:
            self.busy.discard(session_id)
            for m in stored:
                await asyncio.to_thread(self.store.delete_message, m.id)

        return undo

    def release(self, session_id: str) -> Callable[[TurnResult], None]:
        """The end hook that lets the session's turn go."""

        def release(_: TurnResult) -> None:
            self.busy.discard(session_id)

        return release
