"""`ChatTurns`: one chat turn, built in one place, into the engine request and what the reply
carries (citations of `rag` sources, end hooks, the undo of a refused session turn). A turn from
messages (/v1/chat/completions, Anthropic's /v1/messages, a Responses turn that is not stored)
is built here; a turn of a stored session (a session message, regenerate, a stored Responses
turn) by app/chat/sessions/stored_turns.py's one pipeline, from the steps here. Every turn's request
ends with the same steps (`finish`).

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
from dataclasses import dataclass, field, replace
from typing import Any

from app.chat.image_work import ImageWork
from app.chat.images import check_image_count
from app.chat.messages import ChatMessage
from app.chat.sessions.session_history import History, history_prompt
from app.chat.sessions.stored_replies import calls_reply_store, reply_store
from app.chat.sessions.turn_cache import TurnCache
from app.chat.templates.prompter import PromptEnd, Prompter
from app.chat.templates.reasoning import ReasoningAsk, Thinking
from app.chat.tool_messages import TemplateTools, prompt_messages
from app.chat.tools import ReplyParser, ToolSpec
from app.chat.turn import TurnResult
from app.chat.turn_sources import ChatSources, Citation, RagAsk, SourceFinder
from app.config import Settings
from app.db.store import Store
from app.engine.engine import Engine
from app.engine.request import GenerationRequest, RequestError, no_projector
from app.media.media_store import MediaStore
from mm.mtmd_bridge import ImageChunk
from mm.token_sequence import TokenSequence

# The engine request of a prompt, with the request body's sampling, grammar and salt.
Build = Callable[[TokenSequence], Awaitable[GenerationRequest]]
EndHook = Callable[[TurnResult], None]


@dataclass(slots=True)
class Turn:
    request: GenerationRequest
    route: str  # "chat" | "session" | "responses" (metrics label)
    on_end: list[EndHook] = field(default_factory=list)
    session_id: str | None = None  # a session message's: named on every response object
    citations: list[Citation] | None = None  # a `rag` turn's: sent first, on the message
    # A session turn refused before generation (queue full, shutting down) is undone with
    # this, as if never sent. Once submitted, the end hooks record whatever happens to it.
    undo: Callable[[], Awaitable[None]] | None = None
    thinking: Thinking = field(default_factory=Thinking)  # how the reply's reasoning is split

    def another(self) -> Turn:
        """The same turn for one more choice of the reply (n > 1): an engine request of its
        own (the engine fills in its defaults), the prompt, images and grammar shared."""
        request = replace(self.request, sampling=replace(self.request.sampling))
        return replace(self, request=request)


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
        images: ImageWork,
    ) -> None:
        self.engine = engine
        self.prompter = prompter
        self.settings = settings
        self.store = store  # sessions and their messages
        self.turns = turns  # exact tokens of recent chat replies
        self.media = media  # uploaded and stored images
        self.sources = sources  # `rag` sources (app/docs/questions/doc_questions.py)
        self.images = images  # images fetched, decoded, tokenized (app/chat/image_work.py)

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
        found = None
        if rag is not None:
            question = messages[-1].text()
            images = any(m.has_images() for m in messages)
            found = await self.find_sources(tenant, rag, question, [], images)
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
        await self.finish(request, session, tenant, (rag, found) if rag and found else None)
        thinking = self._thinking(reasoning, request.prompt)
        citations = found.citations if found is not None else None
        return Turn(request, "chat", on_end, citations=citations, thinking=thinking)

    async def finish(
        self,
        request: GenerationRequest,
        session: str | None,
        tenant: str,
        sources: tuple[RagAsk, ChatSources] | None,
    ) -> None:
        """What every turn's request ends with: the template's continuation, the session whose
        slot it goes back to, the documents its KV holds and a `rag` turn's blend plan."""
        request.continuation = self.prompter.continuation
        request.session = session
        if sources is None:
            request.documents = frozenset()
            return
        rag, found = sources
        request.documents = found.documents
        if found.citations and self.sources is not None:
            await self.sources.blend(tenant, rag, found.citations, request)

    def _prompter(self, reasoning: ReasoningAsk) -> Prompter:
        return self.prompter.rendering(reasoning.kwargs())

    def _thinking(self, reasoning: ReasoningAsk, prompt: TokenSequence) -> Thinking:
        tail = self.prompter.tail_text(prompt)  # does the prompt leave the model in a thought?
        reasons = self.prompter.knows_reasoning
        return reasoning.thinking(self.settings.reasoning_format, tail, reasons)

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
        vision = self.engine.images
        if vision is None:
            raise no_projector("messages")
        await self.engine.ready()  # a sleeping model's projector loads with it
        prompt, images = await self.images.prompt(prompter, vision, messages, tenant, tools)
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

    async def find_sources(
        self, tenant: str, rag: RagAsk, query: str, history: list[Any], images: bool
    ) -> ChatSources:
        """The `rag` sources of a text message (`images`: the message has some); `history`:
        the contents of the conversation's earlier user messages."""
        if images:
            raise RequestError("rag takes text messages only", param="rag")
        if self.sources is None:
            raise RequestError("documents are not available", code="unavailable", status=503)
        return await self.sources.sources(tenant, rag, query, history)

    # --- the steps of a stored session's turn (app/chat/sessions/stored_turns.py) ---

    async def stored_images(
        self, parts: list[dict[str, Any]], tenant: str, param: str
    ) -> list[dict[str, Any]]:
        """A new message's parts with its images checked and stored: uploaded images it names
        must be the tenant's; inline ones are stored now as the tenant's, kept by id as the
        stored history keeps them."""
        media = self.media
        if self.engine.images is None or media is None:
            raise no_projector(param)
        # Counted before any is read or stored (the whole history is counted when it is read).
        n = sum(1 for p in parts if p.get("type") in ("image_url", "image_file"))
        check_image_count(n, self.settings, param)
        return await self.images.store(parts, media, tenant, param)

    async def session_prompt(
        self, h: History, reasoning: ReasoningAsk | None, tenant: str
    ) -> tuple[TokenSequence, dict[str, ImageChunk], Thinking]:
        """The prompt of a stored history (the replies' own ids spliced in), its images (the
        tenant's: checked again, as an imported history may name any id), and how its reply's
        reasoning is split (None: not split, stored as generated)."""
        asked = reasoning or ReasoningAsk()
        prompter, vision = self._prompter(asked), self.engine.images
        images: dict[str, ImageChunk] = {}
        if not h.has_images:
            prompt = await history_prompt(h, prompter)
        elif vision is None:
            raise no_projector("content")
        else:  # the history's images: stored ones, read back by id, the tenant's only
            await self.engine.ready()  # a sleeping model's projector loads with it
            prompt, images = await self.images.prompt(
                prompter, vision, h.messages, tenant, None, "content"
            )
        thinking = self._thinking(asked, prompt) if reasoning is not None else Thinking()
        return prompt, images, thinking

    def check(self, request: GenerationRequest) -> None:
        """Before a session turn stores anything: bad input changes nothing, nor does a full
        queue (the common case; submit checks again)."""
        self.engine.validate(request)
        self.engine.check_room()

    def reply_hook(
        self, session_id: str, prompt_tokens: int, thinking: Thinking, parser: ReplyParser | None
    ) -> EndHook:
        """The end hook that stores a session turn's reply: with its tool calls where `parser`
        reads them, else with its reasoning apart."""
        store, prompter = self.store, self.prompter
        if parser is not None:
            return calls_reply_store(store, prompter, session_id, prompt_tokens, parser)
        return reply_store(store, prompter, session_id, prompt_tokens, thinking)
