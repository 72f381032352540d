"""A chat's text prompt into its engine request: the messages rendered, tokenized through the
turn cache (app/chat/sessions/turn_cache.py: earlier replies keep the ids the model generated),
and the request built; also after a collection's whole prefix (full-document mode,
app/chat/full_prompt.py), when the conversation follows it and fits with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from app.chat.full_prompt import fits, full_messages, start_of
from app.chat.messages import ChatMessage
from app.chat.sessions.turn_cache import TurnCache
from app.chat.templates.prompter import PromptEnd, Prompter
from app.chat.tool_messages import TemplateTools
from app.chat.turn import TurnResult
from app.chat.turn_sources import WholeSources
from app.engine.request import GenerationRequest
from mm.token_sequence import TokenSequence

# The engine request of a prompt, with the request body's sampling, grammar and salt.
Build = Callable[[TokenSequence], Awaitable[GenerationRequest]]
EndHook = Callable[[TurnResult], None]


async def text_request(
    turns: TurnCache,
    prompter: Prompter,
    template: list[dict[str, Any]],
    tools: TemplateTools,
    end: PromptEnd,
    salt: str,
    build: Build,
    whole: WholeSources | None = None,
) -> tuple[GenerationRequest, EndHook] | None:
    """The request of these template messages and the end hook that remembers its reply's
    tokens; `whole`: the prefix the rendered messages follow (None: it does not)."""
    # A full-mode turn's text stands for its prefix's tokens up to the mark: its turns are
    # kept apart, by the prefix.
    key = salt if whole is None else f"{salt}\x00full:{whole.key}"

    def tokenize() -> tuple[str, list[int]] | None:
        # Rendering and tokenizing a long history is CPU work: never on the event loop.
        text = prompter.render_end(template, tools, end)
        start = start_of(whole, prompter, text) if whole is not None else ([], "")
        if start is None:
            return None

        def extend(tokens: list[int], done: str, text: str) -> list[int]:
            return prompter.extend(*((tokens, done) if done else start), text)

        return text, turns.tokens_of(key, text, extend)

    made = await asyncio.to_thread(tokenize)
    if made is None:
        return None
    text, tokens = made
    request = await build(TokenSequence(tokens))

    def remember(result: TurnResult) -> None:
        if result.status == "complete" and prompter.matches(result.tokens, result.text):
            turns.remember(key, text + result.text, [*tokens, *result.tokens])

    return request, remember


async def full_request(
    turns: TurnCache,
    prompter: Prompter,
    messages: list[ChatMessage],
    whole: WholeSources,
    tools: TemplateTools,
    end: PromptEnd,
    salt: str,
    build: Build,
) -> tuple[GenerationRequest, EndHook] | None:
    """A chat's request after its collections' whole prefix; None when the conversation does
    not follow it (app/chat/full_prompt.py) or does not fit with it: answered by retrieval."""
    shaped = full_messages(whole, messages)
    if shaped is None:
        return None
    template = [m.for_template() for m in shaped[0]]
    built = await text_request(turns, prompter, template, tools, end, salt, build, whole)
    if built is None or not fits(whole, built[0].prompt, built[0].max_tokens):
        return None
    return built
