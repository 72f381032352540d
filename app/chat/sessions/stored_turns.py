"""`StoredTurns`: a turn of a stored conversation (a session), one pipeline for a session message
(and regenerate) and a Responses API turn (app/chat/sessions/response_sessions.py), whose new
messages may be of any role (user messages, tool results, even earlier assistant turns sent as
input), with tools.

The turn's prompt is built from the stored history with the replies' own generated ids
(app/chat/sessions/conversation.py), so it extends the previous turn token for token, the whole
history is reused from the KV, and the session goes back to the slot that holds it. Nothing is lost:
the new messages are stored before generation (app/chat/sessions/session_writes.py), the reply when
it ends, whatever its status (app/chat/sessions/stored_replies.py). The steps of building the turn
are `ChatTurns`' (app/chat/chat_turn.py), the same as a chat's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol, cast

from app.chat.chat_turn import Build, ChatTurns, Turn
from app.chat.full_prompt import fits, full_conversation, remembered
from app.chat.messages import ChatMessage
from app.chat.sessions.session_history import History, history, turn_history
from app.chat.sessions.session_writes import Content, Hold, NewMessage, SessionWrites, WriteNotes
from app.chat.templates.reasoning import ReasoningAsk, Thinking
from app.chat.tools import ReplyParser, ToolSpec
from app.chat.turn_sources import ChatSources, RagAsk, WholeSources
from app.db.records import MessageRecord, SessionRecord
from app.engine.request import GenerationRequest, RequestError

SESSION_HOLD = Hold("session_id", "this session is already generating a reply")
RESPONSE_HOLD = Hold(
    "previous_response_id", "this conversation is already generating a response", "conversation"
)


@dataclass(slots=True)
class StoredTurn:
    turn: Turn
    inputs: list[MessageRecord]  # the new messages as stored


@dataclass(slots=True)
class SessionInput:
    """What one turn adds to a stored session, and how its reply is kept."""

    messages: list[NewMessage]  # stored before generation
    history: History  # the next prompt's messages: the stored ones, then these
    route: str  # "session" | "responses" (metrics label)
    hold: Hold  # the 409 while another turn of the session runs
    replace_from: int | None = None  # regenerate: the messages from that seq on are replaced
    # The request's reasoning ask (the reply's reasoning is split off and stored apart); None:
    # the reply is stored as generated.
    reasoning: ReasoningAsk | None = None
    parser: ReplyParser | None = None  # the reply's tool calls, stored with it (Responses)
    sources: tuple[RagAsk, ChatSources] | None = None  # a `rag` turn's
    full: FullTurn | None = None  # a `rag` turn's in full-document mode: built already
    names_session: bool = False  # every response object names the session (session_id)
    notes: WriteNotes | None = None  # an Idempotency-Key's: where the messages begin, the turn
    # A retry's take-over replacing what its first try stored (`replace_from`): the turns the
    # session had then; refused if it has had others since.
    expect: int | None = None


@dataclass(slots=True)
class FullTurn:
    """A session turn after its collections' whole prefix (app/chat/full_prompt.py)."""

    request: GenerationRequest
    thinking: Thinking
    whole: WholeSources


class SessionAsk(Protocol):
    """A message to a session (app/api/kvchat/session_schemas.py: SessionMessageRequest)."""

    rag: RagAsk | None

    def text(self) -> str: ...

    def has_images(self) -> bool: ...


def _calls(m: ChatMessage) -> list[dict[str, Any]] | None:
    if not m.tool_calls:
        return None
    return [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments_text()}
        for c in m.tool_calls
    ]


def _stored(m: ChatMessage) -> NewMessage:
    content = m.model_dump()["content"]
    return NewMessage(m.role, "" if content is None else content, _calls(m), m.tool_call_id)


class StoredTurns:
    def __init__(self, chats: ChatTurns, writes: SessionWrites) -> None:
        self.chats = chats  # the steps every turn shares
        self.writes = writes  # a session's new messages, one turn at a time across replicas

    async def busy(self, session_id: str) -> bool:
        """Whether a turn of the session runs now, here or on another replica."""
        return await self.writes.busy(session_id)

    async def from_session(
        self,
        session: SessionRecord,
        ask: SessionAsk,
        content: Content,
        tenant: str,
        build: Build,
        replace_from: int | None = None,
        reasoning: ReasoningAsk | None = None,
        notes: WriteNotes | None = None,
        expect: int | None = None,
    ) -> Turn:
        """A new message to a stored session (`content` as stored); with `replace_from`, the
        messages from that seq on are replaced by it (regenerate, or a keyed retry's take-over
        that `expect`s the session's turns then). The user message is stored before this
        returns, its `rag` sources first and its inline images stored; the reply by the turn's
        end hooks, its reasoning apart. `notes`: a keyed request's record of what it stores."""
        chats, found, full = self.chats, None, None
        if ask.rag is not None:
            earlier = [m.content for m in session.messages if m.role == "user"]
            full = await self._full(session, ask, content, tenant, build, reasoning, earlier)
        if ask.rag is not None and full is None:
            finder = chats.finder(ask.has_images())
            found = await finder.sources(tenant, ask.rag, ask.text(), earlier)
            content = [found.part, {"type": "text", "text": ask.text()}]
        if ask.has_images():  # a message with images has parts
            content = await chats.stored_images(
                cast(list[dict[str, Any]], content), tenant, "content"
            )
        new = SessionInput(
            [NewMessage("user", content)],
            history(session, content),
            "session",
            SESSION_HOLD,
            replace_from,
            reasoning or ReasoningAsk(),
            sources=(ask.rag, found) if ask.rag is not None and found is not None else None,
            full=full,
            names_session=True,
            notes=notes,
            expect=expect,
        )
        return (await self.turn(session, new, tenant, build)).turn

    async def _full(
        self,
        session: SessionRecord,
        ask: SessionAsk,
        content: Content,
        tenant: str,
        build: Build,
        reasoning: ReasoningAsk | None,
        earlier: list[Any],
    ) -> FullTurn | None:
        """A `rag` turn in full-document mode (its collections all in full mode), its content
        stored as sent; None: answered by retrieval (retrieval collections, or the
        conversation does not follow or fit the prefix)."""
        chats, rag = self.chats, cast(RagAsk, ask.rag)
        whole = await chats.finder(ask.has_images()).whole(tenant, rag, ask.text(), earlier)
        if whole is None:
            return None
        h = history(session, content)
        if h.has_images:  # (a history with images is the projector's, ids and all)
            return None
        asked = reasoning or ReasoningAsk()
        prompter = chats.prompter_for(asked)
        prompt = await asyncio.to_thread(full_conversation, prompter, whole, h.messages, h.replies)
        if prompt is None:
            return None
        request = await build(prompt)
        if not fits(whole, prompt, request.max_tokens):
            return None
        return FullTurn(request, chats.thinking_of(asked, prompt), whole)

    async def from_input(
        self,
        session: SessionRecord,
        new: list[ChatMessage],
        tools: list[ToolSpec],
        parser: ReplyParser,
        tenant: str,
        build: Build,
        notes: WriteNotes | None = None,
    ) -> StoredTurn:
        """A Responses turn: `new` messages of any role after the stored ones, with `tools`;
        the reply is stored with the tool calls `parser` reads in it; `notes`: a keyed
        request's record of what it stores."""
        new = [await self._with_images(m, tenant) for m in new]
        h = turn_history(session, new, tools)
        if not h.messages or h.messages[-1].role != "user":
            raise RequestError("input has nothing new to answer", param="input")
        messages = [_stored(m) for m in new]
        ask = SessionInput(messages, h, "responses", RESPONSE_HOLD, parser=parser, notes=notes)
        return await self.turn(session, ask, tenant, build)

    async def _with_images(self, m: ChatMessage, tenant: str) -> ChatMessage:
        """A user message's inline images stored (by id, as session messages keep them)."""
        if not m.has_images():
            return m
        parts = cast(list[dict[str, Any]], m.model_dump()["content"])
        stored = await self.chats.stored_images(parts, tenant, "input")
        return ChatMessage(role=m.role, content=stored)

    async def turn(
        self, session: SessionRecord, new: SessionInput, tenant: str, build: Build
    ) -> StoredTurn:
        """The one pipeline of a stored session's turn: its prompt from the stored history, the
        engine request checked before anything is stored, the new messages stored holding the
        session's turn, the reply stored (and the turn let go) by its end hooks."""
        chats, writes, full = self.chats, self.writes, new.full
        if full is not None:
            request, thinking = full.request, full.thinking
        else:
            prompt, images, thinking = await chats.session_prompt(
                new.history, new.reasoning, tenant
            )
            request = await build(prompt)
            request.images = images
        whole = full.whole if full is not None else None
        await chats.finish(request, session.id, tenant, new.sources, whole)
        chats.check(request)  # before storing: bad input or a full queue changes nothing
        inputs = await writes.store_new(
            session.id, new.messages, new.hold, new.replace_from, new.notes, new.expect
        )
        cite = remembered(whole.cite) if whole is not None else None
        hooks = [
            chats.reply_hook(session.id, len(request.prompt), thinking, new.parser, cite),
            writes.release(session.id),
        ]
        citations = new.sources[1].citations if new.sources is not None else None
        undo = writes.undo(session.id, inputs)
        named = session.id if new.names_session else None
        turn = Turn(request, new.route, hooks, named, citations, undo, thinking, cite)
        return StoredTurn(turn, inputs)
