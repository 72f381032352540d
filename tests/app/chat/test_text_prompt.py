"""A chat's text prompt through the turn cache, also after a collection's whole prefix: the
packaged model's template, a stand-in for the request builder."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from app.chat.messages import ChatMessage
from app.chat.sessions.turn_cache import TurnCache
from app.chat.templates.prompter import PromptEnd, Prompter
from app.chat.text_prompt import full_request, text_request
from app.chat.turn import TurnResult
from app.chat.turn_sources import WholeSources
from app.engine.events import Finished, Timings
from app.engine.request import GenerationRequest
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence
from tests.app.chat.sessions.test_conversation import odd_ids


def build(max_tokens: int | None = None):  # noqa: ANN201
    async def made(prompt: TokenSequence) -> GenerationRequest:
        return GenerationRequest(prompt, SamplingParams(), max_tokens=max_tokens)

    return made


def conversation(*texts: str) -> list[ChatMessage]:
    roles = ["user", "assistant"]
    return [ChatMessage(role=roles[i % 2], content=t) for i, t in enumerate(texts)]


def test_a_full_chat_begins_with_the_prefix_and_the_next_turn_reuses_the_reply_s_ids(
    prompter: Prompter,
    whole: WholeSources,
):
    turns, end = TurnCache(), PromptEnd()
    first = asyncio.run(
        full_request(turns, prompter, conversation("When?"), whole, None, end, "s", build())
    )
    assert first is not None
    request, remember = first
    assert list(request.prompt.tokens[: len(whole.tokens)]) == whole.tokens
    ids = odd_ids(prompter, "In", " 16", "42.")  # not how "In 1642." tokenizes
    remember(TurnResult("In 1642.", ids, Finished("stop", 1, 3, 0, Timings())))
    # The client sends the history back, the reply as text: its generated ids stand for it.
    history = conversation("When?", "In 1642.", "Who?")
    second = asyncio.run(full_request(turns, prompter, history, whole, None, end, "s", build()))
    assert second is not None
    done = (*request.prompt.tokens, *ids)
    assert second[0].prompt.tokens[: len(done)] == done
    # The same messages without the prefix: another prompt, not the full one's tokens.
    template = [m.for_template() for m in conversation("When?")]
    plain = asyncio.run(text_request(turns, prompter, template, None, end, "s", build()))
    assert plain is not None and plain[0].prompt.tokens == prompter.chat(template).tokens


def test_a_full_chat_that_does_not_fit_or_follow_the_prefix_has_no_request(
    prompter: Prompter,
    whole: WholeSources,
):
    turns, end, messages = TurnCache(), PromptEnd(), conversation("When?")
    # The stand-in's context: 100 tokens after the prefix, for the conversation and the answer
    # (the request's max_tokens).
    assert asyncio.run(full_request(turns, prompter, messages, whole, None, end, "s", build(9)))
    over = full_request(turns, prompter, messages, whole, None, end, "s", build(99))
    assert asyncio.run(over) is None
    long = conversation("word " * 150)
    assert asyncio.run(full_request(turns, prompter, long, whole, None, end, "s", build())) is None
    other = replace(whole, system="Another system prompt.")
    assert (
        asyncio.run(full_request(turns, prompter, messages, other, None, end, "s", build())) is None
    )
