"""OpenAI-compatible endpoints: /v1/chat/completions, /v1/completions, /v1/models."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Header, Request

from app.api.auth import cache_salt, tenant_of
from app.api.errors import STREAMING
from app.api.responder import Reply, respond
from app.api.responses import ChatShape, TextShape
from app.api.routes.search import rag_blend, rag_sources, with_citations
from app.api.schemas import ChatCompletionRequest, CompletionRequest
from app.api.services import Services, ServicesDep
from app.api.structured_output import finish_request, refuse_unsupported
from app.chat.images import image_prompt
from app.chat.messages import ChatMessage
from app.chat.turn import TurnResult
from app.engine.request import RequestError, no_projector
from mm.token_sequence import TokenSequence

router = APIRouter(prefix="/v1")


async def _check_session(services: Services, session_id: str, tenant: str) -> None:
    """A chat's session_id must name a session of the caller's tenant (POST /v1/sessions)."""
    found = await asyncio.to_thread(services.store.get_session, session_id, False, tenant)
    if found is None:
        raise RequestError(
            f"session {session_id!r} does not exist; create one with POST /v1/sessions",
            param="session_id",
            code="not_found",
            status=404,
        )


@router.post("/chat/completions", responses=STREAMING)
async def chat_completions(
    body: ChatCompletionRequest,
    http: Request,
    services: ServicesDep,
    x_session_id: str | None = Header(default=None, max_length=128),
):
    refuse_unsupported(body)
    session = body.session_id or x_session_id
    if session is not None:
        await _check_session(services, session, tenant_of(http))
    prompter, turns, salt = services.prompter, services.turns, cache_salt(http, body.cache_salt)
    on_end = []
    citations, documents = None, frozenset()
    if body.rag is not None:
        if any(m.has_images() for m in body.messages):
            raise RequestError("rag takes text messages only", param="rag")
        question = body.messages[-1].text()
        part, citations = await rag_sources(services, http, body.rag, question, set())
        documents = frozenset(c["document_id"] for c in citations)
        last = ChatMessage(role="user", content=[part, {"type": "text", "text": question}])
        body.messages = [*body.messages[:-1], last]
    if any(m.has_images() for m in body.messages):
        vision = services.engine.vision
        if vision is None:
            raise no_projector("messages")
        prompt, images = await asyncio.to_thread(
            image_prompt,
            prompter,
            vision,
            body.messages,
            services.settings,
            services.media,
            tenant_of(http),
        )
        request = body.generation(prompt, services.settings.seed)
        request.images = images
    else:
        messages = [m.for_template() for m in body.messages]

        def tokenize() -> tuple[str, list[int]]:
            # Rendering and tokenizing a long history is CPU work: never on the event loop.
            text = prompter.render(messages)
            # Earlier replies keep the ids the model generated (see app/chat/turn_cache.py).
            return text, turns.tokens_of(salt, text, prompter.extend)

        text, tokens = await asyncio.to_thread(tokenize)
        request = body.generation(TokenSequence(tokens), services.settings.seed)

        def remember(result: TurnResult) -> None:
            if result.status == "complete" and prompter.matches(result.tokens, result.text):
                turns.remember(salt, text + result.text, [*tokens, *result.tokens])

        on_end.append(remember)
    await finish_request(request, body, salt, "messages")
    request.continuation = prompter.continuation
    request.session = session
    request.documents = documents
    if body.rag is not None:
        await rag_blend(services, http, body.rag, citations or [], request)
    reply = Reply(ChatShape, "chat", on_end)
    if citations is not None:
        reply.prelude = {"citations": citations}
        reply.reshape = with_citations(citations)
    return await respond(services, request, body, reply, http)


@router.post("/completions", responses=STREAMING)
async def completions(body: CompletionRequest, http: Request, services: ServicesDep):
    refuse_unsupported(body)
    try:
        prompt = await asyncio.to_thread(services.prompter.text_prompt, body.single_prompt())
    except ValueError as e:
        raise RequestError(str(e), param="prompt") from e
    request = body.generation(prompt, services.settings.seed)
    await finish_request(request, body, cache_salt(http, body.cache_salt), "prompt")
    return await respond(services, request, body, Reply(TextShape, "completion"), http)


def _model(services: Services) -> dict[str, Any]:
    model = services.engine.model
    return {
        "id": services.model_name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "kvchat",
        "meta": {
            "n_ctx": model.n_ctx,
            "n_ctx_train": model.n_ctx_train,
            "n_vocab": model.n_vocab,
            "n_slots": model.n_seq_max,
            "n_ctx_request": services.engine.n_ctx_request,
        },
    }


@router.get("/models")
async def models(services: ServicesDep):
    return {"object": "list", "data": [_model(services)]}


@router.get("/models/{model_id:path}")
async def model(model_id: str, services: ServicesDep):
    """OpenAI's models.retrieve: this server serves one model, under its name."""
    if model_id != services.model_name:
        raise RequestError(
            f"model {model_id!r} does not exist; this server serves {services.model_name!r}",
            param="model",
            code="model_not_found",
            status=404,
        )
    return _model(services)
