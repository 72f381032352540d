"""`SessionWrites`: what a turn of a stored session writes before it generates, and the hold
that lets one turn of a session run at a time, on every replica of the database.

A turn's new messages (a user message; for the Responses API also tool results and earlier
assistant turns sent as input) are stored before generation, holding the session's turn: a
second turn at once, here or on another replica, would store messages out of order (409 while
one runs). The hold is the session's lease in the database (app/db/replicas/session_leases.py),
renewed every third of --idempotency-lease while the turn runs; it is let go when the turn ends
(`release`, an end hook) or, for a turn refused before generation, by `undo`, which also deletes
what was stored, as if the turn was never sent. A lease held on another replica is watched
until it runs out (its replica died: the turn goes on) or is renewed (its replica lives: 409),
which a live holder does every third of a lease: whether it died is seen, not guessed from how
much of the lease is left.

A request sent with an Idempotency-Key notes the seq its messages begin at and the turn it took,
before it stores them (`WriteNotes`). A retry that takes it over after its replica died replaces
what that try stored only if the session has had no other turn since (`expect`); otherwise it is
refused (409 `session_changed`) and nothing is deleted: the turns that came after stay.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.chat.sessions.session_lookup import session_not_found
from app.chat.turn import TurnResult
from app.db.records import MessageRecord
from app.db.replicas.session_leases import Changed, SessionLeases, TurnLease
from app.db.store import Store
from app.engine.request import RequestError

log = logging.getLogger(__name__)

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
    subject: str = "session"  # what the API calls it ("conversation" for Responses)


class WriteNotes(Protocol):
    """An Idempotency-Key's record of what its request stores
    (app/api/middleware/idempotent_writes.py: Ticket)."""

    stored: dict[str, Any]  # what an earlier try noted
    resumed: bool  # an earlier try on a replica that died was taken over

    async def note(self, **stored: Any) -> None: ...


@dataclass(slots=True)
class HeldTurn:
    holder: str  # this replica and request, as the lease row names it
    renewing: asyncio.Task[None] | None = None


def changed(what: str) -> RequestError:
    return RequestError(
        f"this request was first tried on a server that stopped, and the {what} has had other "
        "turns since; what that try stored is kept as it is: send a new request (with a new "
        "Idempotency-Key)",
        param="Idempotency-Key",
        code="session_changed",
        status=409,
    )


class SessionWrites:
    def __init__(
        self, store: Store, replica: str, lease_s: float, max_turn_s: float | None = None
    ) -> None:
        self.store = store
        self.leases = SessionLeases(store)
        self.replica = replica[:90]
        self.lease_s = lease_s
        # The longest a turn may run (--timeout) and a lease more: a hold never renewed longer.
        self.max_hold_s = max_turn_s + lease_s if max_turn_s else None
        self.held: dict[str, HeldTurn] = {}  # this server's turns in flight, by session
        self._loop: asyncio.AbstractEventLoop | None = None

    async def take(self, session_id: str, hold: Hold, expect: int | None = None) -> TurnLease:
        """Take the session's turn (`expect`: only if the session has had that many turns);
        409 while another turn of it runs, here or on another replica."""
        if session_id in self.held:
            raise _busy(hold)
        held = self.held[session_id] = HeldTurn(f"{self.replica}/{uuid.uuid4().hex[:16]}")
        try:
            lease = await self._take(session_id, held.holder, hold, expect)
        except BaseException:
            self.held.pop(session_id, None)
            raise
        self._loop = asyncio.get_running_loop()
        held.renewing = self._loop.create_task(self._renew(session_id, held.holder))
        return lease

    async def _take(
        self, session_id: str, holder: str, hold: Hold, expect: int | None
    ) -> TurnLease:
        leases, give_up = self.leases, time.monotonic() + 2 * self.lease_s
        ends: float | None = None  # when the holder's lease ends, as first seen
        while True:
            try:
                got = await asyncio.to_thread(leases.take, session_id, holder, self.lease_s, expect)
            except KeyError:  # deleted meanwhile
                raise session_not_found(session_id) from None
            if isinstance(got, TurnLease):
                return got
            if isinstance(got, Changed):
                raise changed(hold.subject)
            end = time.monotonic() + got.remaining_s
            ends = end if ends is None else ends
            # Renewed since first seen (a second of slack for the clocks' reads): it lives.
            if end > ends + 1.0 or time.monotonic() > give_up:
                raise _busy(hold)
            await asyncio.sleep(min(max(got.remaining_s, 0.01), 0.25))

    async def store_new(
        self,
        session_id: str,
        messages: list[NewMessage],
        hold: Hold,
        replace_from: int | None = None,
        notes: WriteNotes | None = None,
        expect: int | None = None,
    ) -> list[MessageRecord]:
        """Store the new messages, holding the session's turn; with `replace_from`, the
        messages from that seq on are replaced by them (regenerate, or a retry's take-over of
        its first try's, which `expect`s the turns the session had then). `notes` learns where
        the messages begin and the turn, before they are stored."""
        lease = await self.take(session_id, hold, expect)
        stored: list[MessageRecord] = []
        try:
            if notes is not None:
                begins = lease.next_seq if replace_from is None else replace_from
                await notes.note(from_seq=begins, turn=lease.turn)
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
            await self.let_go(session_id)
            raise session_not_found(session_id) from None
        except BaseException:
            await self.let_go(session_id)
            raise

    def undo(self, session_id: str, stored: list[MessageRecord]) -> Callable[[], Awaitable[None]]:
        """For a turn refused before generation: its messages deleted, the hold let go."""

        async def undo() -> None:
            try:
                for m in stored:
                    await asyncio.to_thread(self.store.delete_message, m.id)
            finally:
                await self.let_go(session_id)

        return undo

    def release(self, session_id: str) -> Callable[[TurnResult], None]:
        """The end hook that lets the session's turn go (after the reply is stored: the hooks
        run in order). It runs in a worker thread, or on the event loop when cut short."""

        def release(_: TurnResult) -> None:
            held = self._drop(session_id)
            if held is not None:
                self.leases.release(session_id, held.holder)

        return release

    async def let_go(self, session_id: str) -> None:
        """Let the session's turn go (the turn never ran, or its session is gone)."""
        held = self._drop(session_id)
        if held is not None:
            await asyncio.to_thread(self.leases.release, session_id, held.holder)

    async def busy(self, session_id: str) -> bool:
        """Whether a turn of the session runs now, here or on another replica."""
        if session_id in self.held:
            return True
        return await asyncio.to_thread(self.leases.held, session_id)

    def _drop(self, session_id: str) -> HeldTurn | None:
        held = self.held.pop(session_id, None)
        if held is not None and held.renewing is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(held.renewing.cancel)
        return held

    async def _renew(self, session_id: str, holder: str) -> None:
        """Renew the lease every third of it while the turn runs (a database hiccup may miss
        two renewals before it runs out); never for longer than a turn may run."""
        started = time.monotonic()
        while self.max_hold_s is None or time.monotonic() - started < self.max_hold_s:
            await asyncio.sleep(self.lease_s / 3)
            try:
                renewed = await asyncio.to_thread(
                    self.leases.renew, session_id, holder, self.lease_s
                )
            except Exception:
                log.exception("could not renew the hold on a session's turn")
                continue
            if not renewed:  # taken over after it ran out, or the session is gone
                return


def _busy(hold: Hold) -> RequestError:
    return RequestError(
        f"{hold.what}; wait for it or cancel it first",
        param=hold.param,
        code="session_busy",
        status=409,
    )
