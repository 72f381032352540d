"""`StoredTurns`: a turn of a stored conversation (a session) from new messages of any role
(user messages, tool results, even earlier assistant turns sent as input), with tools: what the
Responses API runs on (app/api/responses/responses_routes.py).

As a session message does (app/chat/chat_turn.py), the turn's prompt is built from the stored
history with the replies' own generated ids, so it extends the previous turn token for token
and goes back to the slot that holds it; the new messages are stored before generation, the
reply (its text and its tool calls) when it ends, whatever its status.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

from app.chat.chat_turn import Build, ChatTurns, EndHook, Turn
from app.chat.messages import ChatMessage
from app.chat.sessions.session_history import (
    history_prompt,
    store_images,
    turn_history,
    visible_uploads,
)
from app.chat.sessions.session_lookup import session_not_found
from app.chat.sessions.stored_replies import reply_fields
from app.chat.tools import ReplyParser, ToolSpec
from app.chat.turn import TurnResult
from app.db.records import MessageRecord, SessionRecord
from app.engine.request import RequestError, no_projector


@dataclass(slots=True)
class StoredTurn:
    turn: Turn
    inputs: list[MessageRecord]  # the new messages as stored


def _calls(m: ChatMessage) -> list[dict[str, Any]] | None:
    if not m.tool_calls:
        return None
    return [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments_text()}
        for c in m.tool_calls
    ]


class StoredTurns:
    def __init__(self, chats: ChatTurns) -> None:
        self.chats = chats  # its engine, prompter, store, media, and the sessions' busy set

    async def turn(
        self,
        session: SessionRecord,
        new: list[ChatMessage],
        tools: list[ToolSpec],
        parser: ReplyParser,
        tenant: str,
        build: Build,
    ) -> StoredTurn:
        chats = self.chats
        new = [await self._with_images(m, tenant) for m in new]
        h = turn_history(session, new, tools)
        if not h.messages or h.messages[-1].role != "user":
            raise RequestError("input has nothing new to answer", param="input")
        vision = chats.engine.vision
        prompt, images = await history_prompt(
            h, chats.prompter, vision, chats.settings, chats.media
        )
        request = await build(prompt)
        request.session = session.id
        request.continuation = chats.prompter.continuation
        request.images = images
        chats.engine.validate(request)  # bad input changes nothing: checked before storing
        chats.engine.check_room()
        inputs = await self._store_inputs(session.id, new)

        async def undo() -> None:
            chats.busy.discard(session.id)
            for m in inputs:
                await asyncio.to_thread(chats.store.delete_message, m.id)

        hooks = [self._reply_store(session.id, len(prompt), parser), self._release(session.id)]
        turn = Turn(request, "responses", hooks, undo=undo)
        return StoredTurn(turn, inputs)

    async def _with_images(self, m: ChatMessage, tenant: str) -> ChatMessage:
        """A user message's inline images stored (by id, as session messages keep them)."""
        if not m.has_images():
            return m
        media = self.chats.media
        if self.chats.engine.vision is None or media is None:
            raise no_projector("input")
        parts = cast(list[dict[str, Any]], m.model_dump()["content"])
        await asyncio.to_thread(visible_uploads, parts, media, tenant)
        stored = await asyncio.to_thread(store_images, parts, media, self.chats.settings)
        return ChatMessage(role=m.role, content=stored)

    async def _store_inputs(self, session_id: str, new: list[ChatMessage]) -> list[MessageRecord]:
        """Store the new messages, holding the session's turn (409 while another runs)."""
        chats = self.chats
        what = "this conversation is already generating a response"
        chats.hold(session_id, "previous_response_id", what)
        stored: list[MessageRecord] = []
        try:
            for m in new:
                content = m.model_dump()["content"]
                stored.append(
                    await asyncio.to_thread(
                        chats.store.add_message,
                        session_id,
                        m.role,
                        "" if content is None else content,
                        tool_calls=_calls(m),
                        tool_call_id=m.tool_call_id,
                    )
                )
            return stored
        except KeyError:  # deleted meanwhile
            chats.busy.discard(session_id)
            raise session_not_found(session_id) from None
        except BaseException:
            chats.busy.discard(session_id)
            raise

    def _reply_store(self, session_id: str, prompt_tokens: int, parser: ReplyParser) -> EndHook:
        store, prompter = self.chats.store, self.chats.prompter

        def store_reply(result: TurnResult) -> None:
            content, calls = parser.parse(result.text)
            store.add_message(
                session_id,
                "assistant",
                content,
                **reply_fields(result, prompter, prompt_tokens),
                tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
                or None,
            )

        return store_reply

    def _release(self, session_id: str) -> EndHook:
        def release(_: TurnResult) -> None:
            self.chats.busy.discard(session_id)

        return release
