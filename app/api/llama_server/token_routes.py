"""llama-server's utility endpoints: /tokenize, /detokenize, /apply-template."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from app.api.schemas import TemplateKwargs
from app.api.services import ServicesDep
from app.api.tool_schemas import ToolDef, tool_specs
from app.chat.messages import ChatMessage
from app.chat.tool_messages import prompt_messages
from app.engine.request import RequestError
from app.engine.tokenizer import Tokenizer

router = APIRouter()


class TokenizeRequest(BaseModel):
    content: str
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False  # llama-server's: each token with its text


class DetokenizeRequest(BaseModel):
    tokens: list[int]


class ApplyTemplateRequest(BaseModel):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDef] | None = Field(default=None, max_length=128)
    add_generation_prompt: bool = True
    chat_template_kwargs: TemplateKwargs = None


# Tokens written per piece of a `with_pieces` answer: a text of millions of tokens is answered
# piece by piece, never held whole as objects.
PIECES_AT_ONCE = 4096


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, services: ServicesDep) -> Response:
    """The answer is built off the event loop: a long text has millions of tokens."""
    model = services.engine.tokenizer
    tokens = await asyncio.to_thread(
        model.tokenize, body.content, body.add_special, body.parse_special
    )
    if not body.with_pieces:
        return await asyncio.to_thread(JSONResponse, {"tokens": tokens})
    # A sync iterator: Starlette draws each piece in a worker thread.
    return StreamingResponse(_with_pieces(model, tokens), media_type="application/json")


def _with_pieces(model: Tokenizer, tokens: list[int]) -> Iterator[str]:
    """`{"tokens": [{"id", "piece"}, ...]}` as JSONResponse writes it, a piece at a time."""
    yield '{"tokens":['
    for start in range(0, len(tokens), PIECES_AT_ONCE):
        part = [
            {"id": t, "piece": _piece(model.token_to_piece(t, True))}
            for t in tokens[start : start + PIECES_AT_ONCE]
        ]
        text = json.dumps(part, ensure_ascii=False, separators=(",", ":"))[1:-1]
        yield ("," if start else "") + text
    yield "]}"


def _piece(raw: bytes) -> str | list[int]:
    """llama-server's form: the text, or its bytes where they are not whole UTF-8 (a token that
    holds part of a character)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


@router.post("/detokenize")
async def detokenize(body: DetokenizeRequest, services: ServicesDep):
    model = services.engine.tokenizer
    bad = [t for t in body.tokens if not 0 <= t < model.n_vocab]
    if bad:
        raise RequestError(
            f"token {bad[0]} is outside the vocabulary (0..{model.n_vocab - 1})", param="tokens"
        )
    return {"content": await asyncio.to_thread(model.detokenize, body.tokens)}


@router.post("/apply-template")
async def apply_template(body: ApplyTemplateRequest, services: ServicesDep):
    """The prompt text a chat with these messages (and tools) is given, as it is rendered."""
    prompter = services.prompter.rendering(body.chat_template_kwargs or {})
    messages, tools = prompt_messages(body.messages, tool_specs(body.tools), prompter.knows_tools)
    template = [m.for_template() for m in messages]
    render = prompter.render
    return {"prompt": await asyncio.to_thread(render, template, body.add_generation_prompt, tools)}
