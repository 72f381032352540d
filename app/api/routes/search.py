"""Search over collections and what is built on it (issue 11): the best chunks for a query
(`/search`), questions answered from them with citations (`/ask`), and the sources with
citations of a chat turn that asks for `rag` (/v1/chat/completions and sessions use them).

Tenancy: every collection is looked up under `tenant_of(request)`; another tenant's answers
404 as if it did not exist.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from app.api.auth import cache_salt
from app.api.doc_schemas import AskRequest, SearchRequest, hit_json
from app.api.responder import Reply, respond
from app.api.responses import ChatShape
from app.api.routes.collections import documents_of, load_collection
from app.api.schemas import RagOptions
from app.api.services import Services, ServicesDep
from app.api.structured_output import finish_request
from app.docs.blend_request import blend_plan, wants_blend
from app.docs.chat_sources import citation, sources_part
from app.docs.retrieval import lay_out, search
from app.engine.request import GenerationRequest
from mm.token_sequence import TokenSequence

router = APIRouter(prefix="/v1")


async def rag_sources(
    services: Services, http: Request, options: RagOptions, query: str, seen: set[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The sources part of a chat message (`"rag"` option) and its citations: the best
    `top_k` chunks over the collections asked for."""
    docs = documents_of(services)
    found: list[tuple[Any, float]] = []
    for collection_id in dict.fromkeys(options.collection_ids):
        await load_collection(services, http, collection_id)
        hits = await search(
            docs,
            collection_id,
            query,
            options.top_k,
            options.score_threshold,
            options.document_ids,
            options.hybrid,
        )
        found.extend((c, hits.scores[c.id]) for c in hits.chunks)
    found.sort(key=lambda cs: (-cs[1], cs[0].id))
    return sources_part(found[: options.top_k], seen)


async def rag_blend(
    services: Services,
    http: Request,
    options: RagOptions,
    citations: list[dict[str, Any]],
    request: GenerationRequest,
) -> None:
    """A chat or session turn with `rag` that blends (`kv_reuse`, else --kv-reuse): the plan
    of where its prompt holds the cited chunks, after the first collection's document head."""
    if not citations or not wants_blend(options.kv_reuse, services.settings.kv_reuse):
        return
    docs = documents_of(services)
    collection = await load_collection(services, http, options.collection_ids[0])
    ids = [int(c["chunk_id"].removeprefix("chunk-")) for c in citations]

    def chunks() -> list[Any]:
        found = docs.chunk_store.chunks_by_id(ids, docs.model_key)
        docs.token_ids(found)
        return found

    head, _ = docs.prompts.parts(collection.system_prompt, "")
    found = await asyncio.to_thread(chunks)
    # Looking for the chunks in a long prompt is CPU work: never on the event loop.
    request.blend = await asyncio.to_thread(blend_plan, head, found, request.prompt)


def with_citations(citations: list[dict[str, Any]]):  # noqa: ANN201
    """A reshape for chat replies: the message carries its citations."""

    def reshape(whole: dict[str, Any]) -> dict[str, Any]:
        for choice in whole["choices"]:
            choice["message"]["citations"] = citations
        return whole

    return reshape


@router.post("/collections/{collection_id}/search")
async def search_collection(
    collection_id: str, body: SearchRequest, http: Request, services: ServicesDep
):
    await load_collection(services, http, collection_id)
    found = await search(
        documents_of(services),
        collection_id,
        body.query,
        body.top_k,
        body.score_threshold,
        body.document_ids,
        body.hybrid,
    )
    return {"object": "list", "data": [hit_json(c, found.scores[c.id]) for c in found.chunks]}


def _answer_shape(whole: dict[str, Any]) -> dict[str, Any]:
    choice = whole["choices"][0]
    return {
        "id": whole["id"],
        "object": "collection.answer",
        "created": whole["created"],
        "model": whole["model"],
        "answer": choice["message"]["content"],
        "finish_reason": choice["finish_reason"],
        "citations": whole["citations"],
        "usage": whole["usage"],
        "timings": whole["timings"],
    }


@router.post("/collections/{collection_id}/ask")
async def ask(collection_id: str, body: AskRequest, http: Request, services: ServicesDep):
    collection = await load_collection(services, http, collection_id)
    docs = documents_of(services)
    found = await search(
        docs,
        collection_id,
        body.question,
        body.top_k,
        body.score_threshold,
        body.document_ids,
        body.hybrid,
    )
    head, tail = docs.prompts.parts(collection.system_prompt, body.question)
    # The tenant's salt, as on every other route: the layout asks the caches under it, and the
    # KV this question builds is never a prefix for another tenant.
    salt = cache_salt(http, body.cache_salt)
    question = await lay_out(services.engine, head, tail, found, salt)
    request = body.generation(
        TokenSequence(question.layout.tokens),
        services.settings.seed,
        documents=question.documents,
    )
    if wants_blend(body.kv_reuse, services.settings.kv_reuse):
        request.blend = await asyncio.to_thread(blend_plan, head, question.chunks, request.prompt)
    await finish_request(request, body, salt, "question")
    citations = [citation(c, question.scores[c.id]) for c in question.chunks]
    reply = Reply(
        ChatShape,
        "ask",
        prelude={"citations": citations},
        timings={"retrieval_ms": round(question.retrieval_ms, 3)},
        reshape=_answer_shape,
    )
    return await respond(services, request, body, reply, http)
