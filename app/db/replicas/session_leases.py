"""`SessionLeases`: one turn of a session at a time, across every replica on the database.

A turn takes its session's lease before it stores anything (`take`) and renews it while it runs;
the lease is let go when the turn ends. A second turn of the session meanwhile, on any replica,
finds it held (409 from app/chat/sessions/session_writes.py). A replica that dies stops renewing:
once the lease has run out the next turn takes it. Each take counts the session's turns, so a
retry that takes over a dead replica's request can tell whether any turn came between its first
try and now (`take`'s `expect`) and never replaces what did.

The lease row is read with FOR UPDATE (PostgreSQL: two replicas taking at once queue on the row;
SQLite serialises every write transaction). The first take of a session inserts its row: of two
replicas inserting at once one wins, the other reads the winner's row again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import Conversation, Message, utcnow
from app.db.replicas.replica_models import SessionTurn
from app.db.store import Store


@dataclass(slots=True)
class TurnLease:
    """A session's turn, taken."""

    turn: int  # the session's turns so far, this one included
    next_seq: int  # the seq its first new message gets (the session's last + 1)


@dataclass(slots=True)
class Held:
    """The session's turn is another request's, for `remaining_s` more unless renewed."""

    remaining_s: float


@dataclass(slots=True)
class Changed:
    """The session has had other turns than the taker expected: `turns` of them."""

    turns: int


class SessionLeases:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    def take(
        self, session_id: str, holder: str, lease_s: float, expect: int | None = None
    ) -> TurnLease | Held | Changed:
        """Take the session's turn for `holder` for lease_s seconds; KeyError if there is no
        such session. `expect`: only if the session has had exactly that many turns (a retry
        that would replace what its first try, turn `expect`, stored)."""
        try:
            return self._take(session_id, holder, lease_s, expect)
        except IntegrityError:  # another replica inserted the row first (or the session went)
            return self._take(session_id, holder, lease_s, expect)

    def _take(
        self, session_id: str, holder: str, lease_s: float, expect: int | None
    ) -> TurnLease | Held | Changed:
        now = utcnow()
        with self._tx(write=True) as s:
            row = s.get(SessionTurn, session_id, with_for_update=True)
            if row is not None and row.holder not in (None, holder) and _live(row, now):
                assert row.lease_until is not None
                return Held((row.lease_until - now).total_seconds())
            turns = row.turns if row is not None else 0
            if expect is not None and turns != expect:
                return Changed(turns)
            if row is None:
                if s.get(Conversation, session_id) is None:
                    raise KeyError(session_id)
                row = SessionTurn(session_id=session_id, turns=0)
                s.add(row)
            row.holder, row.lease_until = holder, now + timedelta(seconds=lease_s)
            row.turns += 1
            s.flush()
            return TurnLease(row.turns, _next_seq(s, session_id))

    def renew(self, session_id: str, holder: str, lease_s: float) -> bool:
        """Extend the lease; False if it is no longer this holder's."""
        lease = utcnow() + timedelta(seconds=lease_s)
        return self._update(session_id, holder, lease_until=lease)

    def release(self, session_id: str, holder: str) -> bool:
        """The turn ended: the next one may take the session at once."""
        return self._update(session_id, holder, holder=None, lease_until=None)

    def held(self, session_id: str) -> bool:
        """Whether a turn of the session runs now, on any replica."""
        with self._tx() as s:
            row = s.get(SessionTurn, session_id)
            return row is not None and row.holder is not None and _live(row, utcnow())

    def _update(self, session_id: str, by: str, **values: object) -> bool:
        query = (
            update(SessionTurn)
            .where(SessionTurn.session_id == session_id, SessionTurn.holder == by)
            .values(**values)
        )
        with self._tx(write=True) as s:
            return s.execute(query).rowcount == 1


def _live(row: SessionTurn, now: object) -> bool:
    return row.lease_until is not None and row.lease_until > now  # type: ignore[operator]


def _next_seq(s: Session, session_id: str) -> int:
    last = s.scalar(select(func.max(Message.seq)).where(Message.session_id == session_id))
    return 0 if last is None else last + 1
