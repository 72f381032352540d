"""`ChatTurns`: one chat turn, built in one place, from OpenAI messages (/v1/chat/completions)
or from a stored session (its messages and regenerate), into the engine request and what the
reply carries (citations of `rag` sources, end hooks, the undo of a refused session turn).

A chat that sends its whole history reuses earlier replies' generated ids from the turn cache
(app/chat/sessions/turn_cache.py). A session turn's prompt is built from the stored history with the
replies' own ids (app/chat/sessions/conversation.py), so it extends the previous turn token for
token and the whole history is reused from the KV; the session goes back to the slot that holds it.
Nothing of a session is lost: the user message is stored before generation, the reply when it
ends (app/chat/sessions/stored_replies.py). The engine request's sampling, grammar and salt come
from the request body, through the `Build` the API layer passes in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from app.chat.images import image_prompt
from app.chat.messages import ChatMessage
from app.chat.sessions.session_history import history, history_prompt, store_images, visible_uploads
from app.chat.sessions.session_lookup import session_not_found
from app.chat.sessions.stored_replies import reply_store
from app.chat.sessions.turn_cache import TurnCache
from app.chat.templates.prompter import PromptEnd, Prompter
from app.chat.templates.reasoning import ReasoningAsk, Thinking
from app.chat.tool_messages import TemplateTools, prompt_messages
from app.chat.tools import ToolSpec
from app.chat.turn import TurnResult
from app.chat.turn_sources import ChatSources, RagAsk, SourceFinder
from app.config import Settings
from app.db.records import MessageRecord, SessionRecord
from app.db.store import Store
from app.engine.engine import Engine
from app.engine.request import GenerationRequest, RequestError, no_projector
from app.media.media_store import MediaStore
from mm.token_sequence import TokenSequence

# The engine request of a prompt, with the request body's sampling, grammar and salt.
Build = Callable[[TokenSequence], Awaitable[GenerationRequest]]
EndHook = Callable[[TurnResult], None]
Content = str | list[dict[str, Any]]  # a message's content as the database stores it


@dataclass(slots=True)
class Turn:
    request: GenerationRequest
    route: str  # "chat" | "session" (metrics label)
    on_end: list[EndHook] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # fields on every response object
    citations: list[dict[str, Any]] | None = None  # a `rag` turn's: sent first, on the message
    # A session turn refused before generation (queue full, shutting down) is undone with
    # this, as if never sent. Once submitted, the end hooks record whatever happens to it.
    undo: Callable[[], Awaitable[None]] | None = None
    thinking: Thinking = field(default_factory=Thinking)  # how the reply's reasoning is split


class SessionAsk(Protocol):
    """A message to a session (app/api/kvchat/session_schemas.py: SessionMessageRequest)."""

    rag: RagAsk | None

    def text(self) -> str: ...

    def has_images(self) -> bool: ...


class ChatTurns:
    def __init__(
        self,
        engine: Engine,
        prompter: Prompter,
        settings: Settings,
        store: Store,
        turns: TurnCache,
        media: MediaStore | None,
        sources: SourceFinder | None,
    ) -> None:
        self.engine = engine
        self.prompter = prompter
        self.settings = settings
        self.store = store  # sessions and their messages
        self.turns = turns  # exact tokens of recent chat replies
        self.media = media  # uploaded and stored images
        self.sources = sources  # `rag` sources (app/docs/questions/doc_questions.py)
        # Sessions with a turn in flight: a second turn at once would store messages out of order.
        self.busy: set[str] = set()

    # --- OpenAI messages ------------------------------------------------------------------------

    async def from_messages(
        self,
        messages: list[ChatMessage],
        rag: RagAsk | None,
        session: str | None,
        tenant: str,
        salt: str,
        build: Build,
        tools: list[ToolSpec] | None = None,
        reasoning: ReasoningAsk | None = None,
        end: PromptEnd | None = None,
    ) -> Turn:
        """A chat that sends its whole history; `session`: its slot-affinity key, if any;
        `tools`: what the model may call (put into the prompt as app/chat/tool_messages.py says);
        `reasoning`: the request's reasoning format and template variables; `end`: how the
        prompt ends (a prefill continues a reply; `messages` are then those before it)."""
        messages, template_tools = prompt_messages(messages, tools or [], self.prompter.knows_tools)
        end = end or PromptEnd()
        reasoning = reasoning or ReasoningAsk()
        prompter = self._prompter(reasoning)
        citations, documents = None, frozenset[str]()
        if rag is not None:
            if any(m.has_images() for m in messages):
                raise RequestError("rag takes text messages only", param="rag")
            question = messages[-1].text()
            found = await self._sources(tenant, rag, question, [])
            citations, documents = found.citations, found.documents
            last = ChatMessage(
                role="user", content=[found.part, {"type": "text", "text": question}]
            )
            messages = [*messages[:-1], last]
        on_end: list[EndHook] = []
        if any(m.has_images() for m in messages):
            if end != PromptEnd():
                raise RequestError(
                    "a chat with images ends with the generation prompt: it cannot continue an "
                    "assistant message nor leave add_generation_prompt out",
                    param="messages",
                )
            request = await self._image_request(messages, tenant, build, template_tools, prompter)
        else:
            request, remember = await self._text_request(
                messages, salt, build, template_tools, prompter, end
            )
            on_end.append(remember)
        request.continuation = self.prompter.continuation
        request.session = session
        request.documents = documents
        if rag is not None and citations and self.sources is not None:
            await self.sources.blend(tenant, rag, citations, request)
        thinking = self._thinking(reasoning, request.prompt)
        return Turn(request, "chat", on_end, citations=citations, thinking=thinking)

    def _prompter(self, reasoning: ReasoningAsk) -> Prompter:
        return self.prompter.rendering(reasoning.kwargs())

    def _thinking(self, reasoning: ReasoningAsk, prompt: TokenSequence) -> Thinking:
        tail = self.prompter.tail_text(prompt)  # does the prompt leave the model in a thought?
        return reasoning.thinking(self.settings.reasoning_format, tail)

    async def count_prompt(
        self,
        messages: list[ChatMessage],
        tenant: str,
        salt: str,
        build: Build,
        tools: list[ToolSpec] | None = None,
        end: PromptEnd | None = None,
    ) -> int:
        """Prompt tokens of a chat request, images and tools included, built as `from_messages`
        builds it and never submitted."""
        turn = await self.from_messages(messages, None, None, tenant, salt, build, tools, end=end)
        return len(turn.request.prompt)

    async def _image_request(
        self,
        messages: list[ChatMessage],
        tenant: str,
        build: Build,
        tools: TemplateTools,
        prompter: Prompter,
    ) -> GenerationRequest:
        vision = self.engine.vision
        if vision is None:
            raise no_projector("messages")
        prompt, images = await asyncio.to_thread(
            image_prompt, prompter, vision, messages, self.settings, self.media, tenant, tools
        )
        request = await build(prompt)
        request.images = images
        return request

    async def _text_request(
        self,
        messages: list[ChatMessage],
        salt: str,
        build: Build,
        tools: TemplateTools,
        prompter: Prompter,
        end: PromptEnd,
    ) -> tuple[GenerationRequest, EndHook]:
        turns = self.turns
        template = [m.for_template() for m in messages]

        def tokenize() -> tuple[str, list[int]]:
            # Rendering and tokenizing a long history is CPU work: never on the event loop.
            text = prompter.render_end(template, tools, end)
            # Earlier replies keep the ids the model generated (see
            # app/chat/sessions/turn_cache.py).
            return text, turns.tokens_of(salt, text, prompter.extend)

        text, tokens = await asyncio.to_thread(tokenize)
        request = await build(TokenSequence(tokens))

        def remember(result: TurnResult) -> None:
            if result.status == "complete" and prompter.matches(result.tokens, result.text):
                turns.remember(salt, text + result.text, [*tokens, *result.tokens])

        return request, remember

    async def _sources(
        self, tenant: str, rag: RagAsk, query: str, history: list[Any]
    ) -> ChatSources:
        if self.sources is None:
            raise RequestError("documents are not available", code="unavailable", status=503)
        return await self.sources.sources(tenant, rag, query, history)

    # --- sessions -------------------------------------------------------------------------------

    async def from_session(
        self,
        session: SessionRecord,
        ask: SessionAsk,
        content: Content,
        tenant: str,
        build: Build,
        replace_from: int | None = None,
        reasoning: ReasoningAsk | None = None,
    ) -> Turn:
        """A new message to a stored session (`content` as stored); with `replace_from`, the
        messages from that seq on are replaced by it (regenerate). The user message is stored
        before this returns; the reply is stored by the turn's end hooks, its reasoning apart."""
        content, found = await self._session_content(session, ask, content, tenant)
        reasoning = reasoning or ReasoningAsk()
        prompter = self._prompter(reasoning)
        prompt, images = await history_prompt(
            history(session, content), prompter, self.engine.vision, self.settings, self.media
        )
        thinking = self._thinking(reasoning, prompt)
        request = await build(prompt)
        request.session = session.id
        request.continuation = self.prompter.continuation
        request.images = images
        request.documents = found.documents if found is not None else frozenset()
        if ask.rag is not None and found is not None and self.sources is not None:
            await self.sources.blend(tenant, ask.rag, found.citations, request)
        self.engine.validate(request)  # bad input changes nothing: checked before storing
        self.engine.check_room()  # nor does a full queue (the common case; submit checks again)
        user = await self._store_question(session.id, content, replace_from)

        async def undo() -> None:
            self.busy.discard(session.id)
            await asyncio.to_thread(self.store.delete_message, user.id)

        stored = reply_store(self.store, self.prompter, session.id, len(prompt), thinking)
        hooks = [stored, self._release(session.id)]
        citations = found.citations if found is not None else None
        extra = {"session_id": session.id}
        return Turn(request, "session", hooks, extra, citations, undo, thinking)

    async def _session_content(
        self, session: SessionRecord, ask: SessionAsk, content: Content, tenant: str
    ) -> tuple[Content, ChatSources | None]:
        """The message as stored: with its `rag` sources first, inline images stored."""
        found = None
        if ask.rag is not None:
            if ask.has_images():
                raise RequestError("rag takes text messages only", param="rag")
            earlier = [m.content for m in session.messages if m.role == "user"]
            found = await self._sources(tenant, ask.rag, ask.text(), earlier)
            content = [found.part, {"type": "text", "text": ask.text()}]
        if ask.has_images():
            media = self.media
            if self.engine.vision is None or media is None:
                raise no_projector("content")
            parts = cast(list[dict[str, Any]], content)  # a message with images has parts
            # Uploaded images the new message names must be the tenant's; inline ones are
            # stored now. The stored history is the tenant's own session: its images need no
            # check.
            await asyncio.to_thread(visible_uploads, parts, media, tenant)
            content = await asyncio.to_thread(store_images, parts, media, self.settings)
        return content, found

    def hold(self, session_id: str, param: str, what: str) -> None:
        """Take the session's turn; 409 while another turn of it runs (`what` says which)."""
        if session_id in self.busy:
            raise RequestError(
                f"{what}; wait for it or cancel it first",
                param=param,
                code="session_busy",
                status=409,
            )
        self.busy.add(session_id)

    async def _store_question(
        self, session_id: str, content: Content, replace_from: int | None
    ) -> MessageRecord:
        """Store the user message, holding the session's turn (409 while another runs)."""
        self.hold(session_id, "session_id", "this session is already generating a reply")
        try:
            return await asyncio.to_thread(
                self.store.add_message, session_id, "user", content, replace_from=replace_from
            )
        except KeyError:  # deleted meanwhile
            self.busy.discard(session_id)
            raise session_not_found(session_id) from None
        except BaseException:
            self.busy.discard(session_id)
            raise

    def _release(self, session_id: str) -> EndHook:
        def release(_: TurnResult) -> None:
            self.busy.discard(session_id)

        return release
