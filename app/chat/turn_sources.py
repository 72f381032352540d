"""What a chat turn that asks for `rag` gets from the documents service
(app/docs/questions/doc_questions.py).

Declared here, on the chat side, so the chat turn depends on this shape and not on the
documents package (which builds on app/chat, not the other way round).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.engine.request import GenerationRequest


class RagAsk(Protocol):
    """`"rag"` on a chat or session request (app/api/schemas.py: RagOptions)."""

    collection_ids: list[str]
    top_k: int
    document_ids: list[str] | None
    score_threshold: float | None
    hybrid: bool
    kv_reuse: str | None  # "prefix" | "blend" (app/engine/reuse_kinds.py: KvReuse); None: the
    # server's --kv-reuse


@dataclass(frozen=True, slots=True)
class Citation:
    """A chunk as a reply cites it (built by app/docs/questions/chat_sources.py; JSON only at the
    API edge, `as_json`)."""

    index: int  # the number its header carries in the prompt
    chunk: int  # the chunk's row id
    document_id: str
    filename: str
    page: int | None
    char_start: int
    char_end: int
    score: float
    text: str

    @property
    def chunk_id(self) -> str:
        """The chunk's id as the API names it."""
        return f"chunk-{self.chunk}"

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "chunk_id": self.chunk_id,
            "document_id": self.document_id,
            "filename": self.filename,
            "page": self.page,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "score": self.score,
            "text": self.text,
        }


def citations_json(citations: list[Citation]) -> list[dict[str, Any]]:
    return [c.as_json() for c in citations]


@dataclass(slots=True)
class ChatSources:
    part: dict[str, Any]  # the text part with the chunks (as stored), before the user's own text
    citations: list[Citation]  # in prompt order
    # Every document the conversation's KV holds once this turn is in: the earlier turns'
    # cited documents and this one's.
    documents: frozenset[str]


@dataclass(slots=True)
class WholeSources:
    """A `rag` turn's collections whole (full-document mode; built by
    app/docs/questions/full_chat.py): the prefix every chat, session turn and `/ask` question of
    the tenant shares, and how the conversation is put after it (app/chat/full_prompt.py): the
    prefix's head is the chat template's rendering of a system message and the start of a user
    message, up to `marker` in `opening`; the conversation goes on from there."""

    tokens: list[int]  # the head, then every chunk's stored ids
    head: int  # how many of `tokens` are the head
    system: str  # the head's system message
    opening: str  # the first user message's text up to the chunks' place (`marker`, included)
    marker: str  # what the chunks stand in for in the rendered text
    question: str  # what the user's own words follow in that message
    # Every document the turn's KV holds: the collections' and those earlier turns cited.
    documents: frozenset[str]
    cite: Callable[[str], list[Citation]]  # an answer's citations, found from its text
    # Tokens over the context one request may use, with `n` tokens of conversation after the
    # prefix and an answer of at most `limit` (None: no limit); <= 0: it fits.
    over: Callable[[int, int | None], int]
    key: str  # tells this prefix apart from every other (the turn cache keeps turns by it)


class SourceFinder(Protocol):
    async def sources(
        self, tenant: str, rag: RagAsk, query: str, history: list[Any]
    ) -> ChatSources:
        """history: the contents of the conversation's earlier user messages."""
        ...

    async def blend(
        self, tenant: str, rag: RagAsk, citations: list[Citation], request: GenerationRequest
    ) -> None:
        """Set the request's blend plan when the turn blends its cited chunks' KV."""
        ...

    async def whole(
        self, tenant: str, rag: RagAsk, question: str, history: list[Any]
    ) -> WholeSources | None:
        """The turn's collections whole when every one it names is in full mode (each must be
        the tenant's); None: the turn is answered by retrieval (`sources`)."""
        ...
