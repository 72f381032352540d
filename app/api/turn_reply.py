"""Chat turns and document answers as HTTP replies: the engine request from a request body
(sampling, grammar, salt), then the reply, with its citations, through the responder.

The turn itself is built by app/chat/chat_turn.py; the question by
app/docs/questions/doc_questions.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from app.api.kvchat.doc_schemas import AskRequest
from app.api.kvchat.session_schemas import SessionMessageRequest
from app.api.middleware.auth import cache_salt, tenant_of
from app.api.middleware.idempotent_writes import Ticket, ticket_of
from app.api.openai.openai_shapes import ChatShape, Envelope
from app.api.openai.tool_reply import ToolCallWriter
from app.api.responder import Reply, respond
from app.api.schemas import GenerationFields
from app.api.services import Services
from app.api.structured_output import finish_request, refuse_unsupported
from app.chat.chat_turn import Build, Turn
from app.chat.turn_sources import Citation, citations_json
from app.db.records import SessionRecord
from app.docs.questions.retrieval import DocQuestion
from app.engine.request import GenerationRequest, RequestError
from mm.token_sequence import TokenSequence

Response = JSONResponse | StreamingResponse


def request_builder(
    body: GenerationFields, services: Services, salt: str, prompt_param: str
) -> Build:
    """The engine request of a prompt with this body's fields; prompt_param: the field that
    errors about the prompt name."""
    seed = services.settings.seed

    async def build(prompt: TokenSequence) -> GenerationRequest:
        request = body.generation(prompt, seed)
        return await finish_request(request, body, salt, prompt_param, services)

    return build


def with_citations(citations: list[dict[str, Any]]):  # noqa: ANN201
    """A reshape for chat replies: the message carries its citations."""

    def reshape(whole: dict[str, Any]) -> dict[str, Any]:
        for choice in whole["choices"]:
            choice["message"]["citations"] = citations
        return whole

    return reshape


def with_verbose(prompt: str):  # noqa: ANN201
    """A reshape for chat replies: llama-server's `__verbose`, the reply as its native
    completion shows it, the prompt's text (special tokens spelled out) among it."""

    def reshape(whole: dict[str, Any]) -> dict[str, Any]:
        usage = whole["usage"]
        whole["__verbose"] = {
            "index": 0,
            "content": whole["choices"][0]["message"]["content"],
            "id_slot": whole["timings"].get("id_slot", -1),
            "stop": True,
            "model": whole["model"],
            "tokens_predicted": usage["completion_tokens"],
            "tokens_evaluated": usage["prompt_tokens"],
            "prompt": prompt,
            "timings": whole["timings"],
        }
        return whole

    return reshape


def _then(first, second):  # noqa: ANN001, ANN202
    return second if first is None else lambda whole: second(first(whole))


async def reply_turn(
    services: Services, turn: Turn, body: GenerationFields, http: Request, verbose: bool = False
) -> Response:
    """`verbose`: the unstreamed reply carries llama-server's `__verbose`."""
    extra = {"session_id": turn.session_id} if turn.session_id is not None else {}
    reply = Reply(ChatShape, turn.route, turn.on_end, extra)
    thinking = turn.thinking if turn.thinking.splits else None
    reply.thinking = thinking
    if body.calls_allowed():
        envelope = Envelope(ChatShape, services.model_name, extra)
        known = {t.name for t in body.tool_specs()}
        reply.writer = ToolCallWriter(envelope, known, body.include_usage(), {}, thinking)
    if turn.citations is not None:
        citations = citations_json(turn.citations)
        reply.prelude = {"citations": citations}
        reply.reshape = with_citations(citations)
    if verbose:
        vocab = services.engine.tokenizer
        ids = [t for t in turn.request.prompt.tokens if t >= 0]  # no image placeholders
        prompt = await asyncio.to_thread(vocab.detokenize, ids, True)
        reply.reshape = _then(reply.reshape, with_verbose(prompt))
    try:
        return await respond(services, turn.request, body, reply, http)
    except RequestError:
        # Refused before generation (queue full, shutting down): as if never sent.
        if turn.undo is not None:
            await turn.undo()
        raise


async def session_turn(
    services: Services,
    session: SessionRecord,
    body: SessionMessageRequest,
    http: Request,
    replace_from: int | None = None,
) -> Response:
    """A message to a session (replacing the messages from `replace_from` on), answered."""
    refuse_unsupported(body)
    if not body.text() and not body.has_images():
        raise RequestError("the message is empty", param="content")
    # The session's defaults, then this request's own fields.
    fields = SessionMessageRequest.model_validate(
        {**session.sampling, **body.model_dump(exclude_unset=True)}
    )
    salt = cache_salt(http, fields.cache_salt)
    build = request_builder(fields, services, salt, "content")
    content = body.model_dump()["content"]  # plain str or list of dicts for the database
    ticket = ticket_of(http)
    replace_from, expect = keyed_turn(ticket, session, replace_from)
    turn = await services.stored.from_session(
        session,
        body,
        content,
        tenant_of(http),
        build,
        replace_from,
        fields.reasoning_ask(),
        ticket,
        expect,
    )
    return await reply_turn(services, turn, fields, http)


def keyed_turn(
    ticket: Ticket | None, session: SessionRecord, replace_from: int | None
) -> tuple[int | None, int | None]:
    """Where a turn sent with an Idempotency-Key stores its message, and the session's turns
    it expects then. A turn notes where its messages begin and the turn it took before storing
    them (app/chat/sessions/session_writes.py); taken over from a replica that died, it replaces
    what that try stored (its user message, unanswered or half-answered) instead of storing the
    message a second time, but only if the session has had no other turn since: checked as it
    takes the session's turn, a 409 otherwise, nothing deleted."""
    if ticket is None or not ticket.resumed:
        return replace_from, None
    begun, turn = ticket.stored.get("from_seq"), ticket.stored.get("turn")
    if not isinstance(begun, int) or not isinstance(turn, int):
        return replace_from, None  # the first try took no turn: it stored nothing
    if replace_from is not None:  # regenerate: again, if no turn came after the first try's
        return replace_from, turn
    first = next((m for m in session.messages if m.seq == begun), None)
    if first is None or first.role != "user":
        return None, None  # its message is gone: the turn is stored anew, deleting nothing
    return begun, turn


def _answer_shape(whole: dict[str, Any]) -> dict[str, Any]:
    choice = whole["choices"][0]
    return {
        "id": whole["id"],
        "object": "collection.answer",
        "created": whole["created"],
        "model": whole["model"],
        "mode": whole["mode"],
        "answer": choice["message"]["content"],
        "finish_reason": choice["finish_reason"],
        "citations": whole["citations"],
        "usage": whole["usage"],
        "timings": whole["timings"],
    }


async def reply_answer(
    services: Services,
    question: DocQuestion,
    citations: list[Citation],
    body: AskRequest,
    salt: str,
    http: Request,
) -> Response:
    """A question to a collection (/ask), answered in a shape of its own: `mode` says what was
    put before the question. Retrieval's citations (the chunks of the prompt) come first;
    full mode's are found from the answer (`DocQuestion.cite`), last."""
    request = body.generation(
        TokenSequence(question.layout.tokens),
        services.settings.seed,
        documents=question.documents,
    )
    await finish_request(request, body, salt, "question", services)
    request.blend = question.blend
    reply = Reply(
        ChatShape,
        "ask",
        prelude={"mode": question.mode, "citations": citations_json(citations)},
        timings={"retrieval_ms": round(question.retrieval_ms, 3)},
        reshape=_answer_shape,
    )
    cite = question.cite
    if cite is not None:
        reply.prelude = {"mode": question.mode}
        reply.epilogue = lambda text: {"citations": citations_json(cite(text))}
    return await respond(services, request, body, reply, http)
