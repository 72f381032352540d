"""What a chat turn that asks for `rag` gets from the documents service
(app/docs/questions/doc_questions.py).

Declared here, on the chat side, so the chat turn depends on this shape and not on the
documents package (which builds on app/chat, not the other way round).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class RagAsk(Protocol):
    """`"rag"` on a chat or session request (app/api/schemas.py: RagOptions)."""

    collection_ids: list[str]
    top_k: int
    document_ids: list[str] | None
    score_threshold: float | None
    hybrid: bool
    kv_reuse: str | None  # "prefix" | "blend"; None: the server's --kv-reuse


@dataclass(slots=True)
class ChatSources:
    part: dict[str, Any]  # the text part with the chunks, put before the user's own text
    citations: list[dict[str, Any]]  # in prompt order
    # Every document the conversation's KV holds once this turn is in: the earlier turns'
    # cited documents and this one's.
    documents: frozenset[str]


class SourceFinder(Protocol):
    async def sources(
        self, tenant: str, rag: RagAsk, query: str, history: list[Any]
    ) -> ChatSources:
        """history: the contents of the conversation's earlier user messages."""
        ...

    async def blend(
        self, tenant: str, rag: RagAsk, citations: list[dict[str, Any]], request: Any
    ) -> None:
        """Set the request's blend plan when the turn blends its cited chunks' KV."""
        ...
