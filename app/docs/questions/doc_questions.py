"""`DocQuestions`: questions to a tenant's collections.

The best chunks for a query (`/search`), the prompt of a question answered from them with
citations (`/ask`), and the sources with citations of a chat turn that asks for `rag`
(/v1/chat/completions and session turns, through app/chat/chat_turn.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from app.chat.turn_sources import ChatSources, Citation, RagAsk
from app.db.documents.document_records import ChunkRecord, CollectionRecord
from app.docs.doc_lookup import load_collection
from app.docs.document_service import Documents
from app.docs.questions.blend_request import blend_plan, wants_blend
from app.docs.questions.chat_sources import citation, cited_before, sources_part
from app.docs.questions.full_question import full_question
from app.docs.questions.retrieval import DocQuestion, Retrieved, lay_out, search
from app.engine.engine import Engine
from app.engine.request import GenerationRequest
from app.engine.reuse_kinds import KvReuse
from mm.token_sequence import TokenSequence


class SearchOptions(Protocol):
    """How to search (app/api/kvchat/doc_schemas.py: SearchRequest, AskRequest; RagOptions)."""

    top_k: int
    document_ids: list[str] | None
    score_threshold: float | None
    hybrid: bool


class AskOptions(SearchOptions, Protocol):
    """How to answer (app/api/kvchat/doc_schemas.py: AskRequest)."""

    kv_reuse: str | None  # "prefix" | "blend"; None: the collection's, else --kv-reuse
    mode: str | None  # "retrieval" | "full"; None: the collection's
    fallback: str | None  # "retrieval": a full question that does not fit is answered so

    def token_limit(self) -> int | None:
        """The answer's most tokens (None: no limit)."""
        ...


class DocQuestions:
    def __init__(self, docs: Documents, engine: Engine, kv_reuse: str = "prefix") -> None:
        self.docs = docs
        self.engine = engine
        self.kv_reuse = kv_reuse  # --kv-reuse: requests and collections that do not say

    async def search(self, collection_id: str, query: str, options: SearchOptions) -> Retrieved:
        return await search(
            self.docs,
            collection_id,
            query,
            options.top_k,
            options.score_threshold,
            options.document_ids,
            options.hybrid,
        )

    async def ask(
        self, collection: CollectionRecord, question: str, options: AskOptions, salt: str
    ) -> tuple[DocQuestion, list[Citation]]:
        """The laid-out prompt of a question to one collection, and its citations.

        salt: the tenant's, as on every other route: the layout asks the caches under it, and
        the KV this question builds is never a prefix for another tenant. In full mode (the
        request's, else the collection's) the prompt holds every ready document and the
        citations come with the answer (`DocQuestion.cite`); one that does not fit is refused,
        or asked by retrieval with the request's fallback."""
        if (options.mode or collection.mode) == "full" and self.docs.prefixes is not None:
            _, tail = self.docs.prompts.parts(collection.system_prompt, question)
            full = await full_question(
                self.docs.prefixes,
                collection,
                question,
                tail,
                options.token_limit(),
                options.fallback,
            )
            if full is not None:
                return full, []
        found = await self.search(collection.id, question, options)
        head, tail = self.docs.prompts.parts(collection.system_prompt, question)
        laid_out = await lay_out(self.engine, head, tail, found, salt)
        if wants_blend(options.kv_reuse, collection, self.kv_reuse):
            # Looking for the chunks in a long prompt is CPU work: never on the event loop.
            prompt = TokenSequence(laid_out.layout.tokens)
            laid_out.blend = await asyncio.to_thread(blend_plan, head, laid_out.chunks, prompt)
        citations = [citation(c, laid_out.scores[c.id]) for c in laid_out.chunks]
        return laid_out, citations

    async def sources(
        self, tenant: str, rag: RagAsk, query: str, history: list[Any]
    ) -> ChatSources:
        """The sources part of a chat message and its citations: the best `top_k` chunks over
        the collections asked for (each must be the tenant's); chunks that earlier user
        messages of the conversation hold are cited by number, not repeated."""
        seen, before = cited_before(history)
        found: list[tuple[ChunkRecord, float]] = []
        for collection_id in dict.fromkeys(rag.collection_ids):
            await load_collection(self.docs, tenant, collection_id)
            hits = await self.search(collection_id, query, rag)
            found.extend((c, hits.scores[c.id]) for c in hits.chunks)
        found.sort(key=lambda cs: (-cs[1], cs[0].id))
        part, citations = sources_part(found[: rag.top_k], seen)
        # The KV of the whole history holds every document cited in it.
        documents = frozenset(before | {c.document_id for c in citations})
        return ChatSources(part, citations, documents)

    async def blend(
        self, tenant: str, rag: RagAsk, citations: list[Citation], request: GenerationRequest
    ) -> None:
        """A chat or session turn with `rag` that blends (`kv_reuse`, else its first
        collection's, else --kv-reuse): the plan of where its prompt holds the cited chunks,
        after the first collection's document head."""
        if not citations or rag.kv_reuse == KvReuse.PREFIX:
            return  # (no collection lookup on the way of a turn that says)
        docs = self.docs
        collection = await load_collection(docs, tenant, rag.collection_ids[0])
        if not wants_blend(rag.kv_reuse, collection, self.kv_reuse):
            return
        ids = [c.chunk for c in citations]

        def chunks() -> list[ChunkRecord]:
            found = docs.chunk_store.chunks_by_id(ids, docs.model_key)
            docs.token_ids(found)
            return found

        head, _ = docs.prompts.parts(collection.system_prompt, "")
        found = await asyncio.to_thread(chunks)
        # Looking for the chunks in a long prompt is CPU work: never on the event loop.
        request.blend = await asyncio.to_thread(blend_plan, head, found, request.prompt)
