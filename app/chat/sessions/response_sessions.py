"""`ResponseSessions`: the Responses API's stored responses as turns of sessions
(app/api/responses/responses_routes.py is their adapter).

A new conversation is a new session; `previous_response_id` continues its conversation on the
slot that holds it. Continuing a response that is not its conversation's latest branches the
conversation there (a fork: the same tokens, still served from the cache). Tenants own their
responses as they own sessions. A request with an Idempotency-Key notes what it is about to
store, so a retry after the replica that ran it died deletes that and begins again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.chat.chat_turn import Build, Turn
from app.chat.messages import ChatMessage
from app.chat.sessions.session_writes import WriteNotes
from app.chat.sessions.stored_responses import (
    StoredResponse,
    find_response,
    is_latest,
    parse_response_id,
    response_id,
)
from app.chat.sessions.stored_turns import RESPONSE_HOLD, StoredTurns
from app.chat.tools import ReplyParser, ToolSpec
from app.db.records import SessionRecord
from app.db.store import Store
from app.engine.request import RequestError


@dataclass(slots=True)
class ResponseInput:
    """A stored response's request, as the service takes it."""

    previous: str | None  # previous_response_id
    system: str | None  # the instructions and the input's system texts; None: none
    new: list[ChatMessage]  # the input's other items, in order
    tools: list[ToolSpec]
    parser: ReplyParser  # the reply's tool calls


@dataclass(slots=True)
class StartedResponse:
    turn: Turn
    id: str
    previous: str | None  # the id of the response it continues
    system: str | None  # its conversation's system prompt


def not_found(rid: str, param: str | None = None) -> RequestError:
    return RequestError(f"no response with id {rid!r}", param=param, code="not_found", status=404)


class ResponseSessions:
    def __init__(self, store: Store, turns: StoredTurns, model: str | None = None) -> None:
        """`model`: the name of this server's model, which the conversations it begins
        remember."""
        self.store = store
        self.turns = turns
        self.model = model

    async def find(
        self, tenant: str, rid: str, param: str | None = None
    ) -> tuple[SessionRecord, StoredResponse]:
        """The tenant's stored response `rid` and its session; 404 naming `param` if none."""
        parsed = parse_response_id(rid)
        if parsed is None:
            raise not_found(rid, param)
        session = await asyncio.to_thread(self.store.get_session, parsed[0], True, tenant)
        found = find_response(session, parsed[1]) if session is not None else None
        if session is None or found is None:
            raise not_found(rid, param)
        return session, found

    async def start(
        self, ask: ResponseInput, tenant: str, build: Build, notes: WriteNotes | None
    ) -> StartedResponse:
        """A stored response's turn: its conversation found (or made), its input stored."""
        await self._undo_earlier_try(notes)
        session, previous = await self._conversation(ask, tenant, notes)
        if notes is not None:  # before the inputs are stored (where they begin: as they are)
            await notes.note(session_id=session.id)
        try:
            stored = await self.turns.from_input(
                session, ask.new, ask.tools, ask.parser, tenant, build, notes
            )
        except BaseException:
            if previous is None:  # the conversation this request began: nothing of it is left
                await asyncio.to_thread(self.store.delete_session, session.id)
            raise
        rid = response_id(session.id, stored.inputs[-1].id)
        return StartedResponse(stored.turn, rid, previous, session.system_prompt)

    async def delete(self, session: SessionRecord, found: StoredResponse) -> None:
        """The response and what followed it in its conversation (later responses built on
        it); 409 while the conversation generates."""
        if await self.turns.busy(session.id):
            raise RequestError(
                "this conversation is generating a response; wait for it to end",
                code="session_busy",
                status=409,
            )
        if found.inputs[0].seq == 0:
            await asyncio.to_thread(self.store.delete_session, session.id)
        else:
            await asyncio.to_thread(
                self.store.delete_messages_from, session.id, found.inputs[0].seq
            )

    async def _conversation(
        self, ask: ResponseInput, tenant: str, notes: WriteNotes | None
    ) -> tuple[SessionRecord, str | None]:
        """The session this response continues (or a new one) and the previous response's id;
        a session made for a keyed request is noted."""
        store, system, previous = self.store, ask.system, ask.previous
        if previous is None:
            created = await asyncio.to_thread(
                store.create_session, system, None, None, None, tenant, self.model
            )
            if notes is not None:
                await notes.note(created_session=created.id)
            return created, None
        session, found = await self.find(tenant, previous, "previous_response_id")
        if found.reply is None:
            raise RequestError(
                f"response {previous!r} is still being generated; wait for it to end",
                param="previous_response_id",
                code="session_busy",
                status=409,
            )
        if not is_latest(session, found):  # a branch: the conversation up to that response
            fork = await asyncio.to_thread(store.fork_session, session.id, found.reply.seq + 1)
            assert fork is not None
            if notes is not None:
                await notes.note(created_session=fork.id)
            session = fork
        if system is not None and system != session.system_prompt:
            # New instructions apply from this turn on (the prompt then differs from its start).
            await asyncio.to_thread(store.update_session, session.id, system_prompt=system)
            session.system_prompt = system
        return session, previous

    async def _undo_earlier_try(self, notes: WriteNotes | None) -> None:
        """A response taken over from a replica that died while it generated: what that try
        stored goes (the conversation it began, or the inputs it added), so it is stored once;
        but only if its conversation has had no other turn since (409 then, nothing deleted)."""
        if notes is None or not notes.resumed:
            return
        noted = notes.stored
        created, sid, begun, turn = (
            noted.get(k) for k in ("created_session", "session_id", "from_seq", "turn")
        )
        took = turn if isinstance(turn, int) and sid == created else 0
        if isinstance(created, str):  # the whole conversation, if no turn but its own came
            await self._undo(created, took, None)
        inputs = isinstance(sid, str) and isinstance(begun, int) and isinstance(turn, int)
        if inputs and sid != created:  # the inputs it added to a conversation it continued
            await self._undo(sid, turn, begun)  # type: ignore[arg-type]
        # This try notes afresh what it stores.
        await notes.note(created_session=None, session_id=None, from_seq=None, turn=None)

    async def _undo(self, session_id: str, turns: int, from_seq: int | None) -> None:
        """Delete the messages from `from_seq` on (None: the session), holding the session's
        turn, taken only if the session has had exactly `turns` turns."""
        writes = self.turns.writes
        try:
            await writes.take(session_id, RESPONSE_HOLD, expect=turns)
        except RequestError as e:
            if e.status == 404:  # gone already
                return
            raise
        try:
            if from_seq is None:
                await asyncio.to_thread(self.store.delete_session, session_id)
            else:
                await asyncio.to_thread(self.store.delete_messages_from, session_id, from_seq)
        finally:
            await writes.let_go(session_id)
