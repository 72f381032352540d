"""A conversation after a collection's whole prefix, with the packaged model's template: the
prompt begins with the prefix's very ids (the head a document question renders, then the
chunks' stored ids), its text is the conversation's, and each turn extends the previous one."""

from __future__ import annotations

from dataclasses import replace

from app.chat.full_prompt import full_conversation, full_messages, remembered, start_of
from app.chat.messages import ChatMessage
from app.chat.templates.prompter import Prompter
from app.chat.turn_sources import Citation, WholeSources
from app.docs.questions.doc_prompt import (
    DEFAULT_SYSTEM_PROMPT,
    INSTRUCTION,
    QUESTION,
    SENTINEL,
)
from app.engine.llama.model import Model
from tests.app.chat.conftest import CHUNK
from tests.app.chat.sessions.test_conversation import odd_ids


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def test_the_conversation_s_own_system_prompt_follows_the_sources(whole: WholeSources):
    messages = [ChatMessage(role="system", content="Be brief."), user("When?")]
    shaped, shift = full_messages(whole, messages)  # type: ignore[misc]
    assert shift == 0 and [m.role for m in shaped] == ["system", "user"]
    assert shaped[0].content == DEFAULT_SYSTEM_PROMPT
    assert shaped[1].content == f"{INSTRUCTION}{SENTINEL}Be brief.\n\n{QUESTION}When?"
    # No system prompt of its own: one message more before the first user message.
    assert full_messages(whole, [user("When?"), user("x")])[1] == 1  # type: ignore[index]
    # Nothing to open with the sources: an assistant message first, or nothing but a system.
    assert full_messages(whole, [ChatMessage(role="assistant", content="Hi"), user("?")]) is None
    assert full_messages(whole, [ChatMessage(role="system", content="x")]) is None


def test_the_prompt_begins_with_the_prefix_s_ids_and_reads_as_the_conversation(
    whole: WholeSources, prompter: Prompter, model: Model
):
    messages = [ChatMessage(role="system", content="Be brief."), user("When was it built?")]
    prompt = full_conversation(prompter, whole, messages, {})
    assert prompt is not None
    assert list(prompt.tokens[: len(whole.tokens)]) == whole.tokens
    shaped, _ = full_messages(whole, messages)  # type: ignore[misc]
    text = prompter.render([m.for_template() for m in shaped]).replace(SENTINEL, CHUNK)
    assert model.detokenize(list(prompt.tokens), special=True) == text


def test_every_turn_extends_the_previous_turn_and_its_reply(
    whole: WholeSources, prompter: Prompter
):
    messages = [ChatMessage(role="system", content="Be brief."), user("Count with me.")]
    replies: dict[int, list[int]] = {}
    previous: tuple[int, ...] | None = None
    for turn in range(3):
        prompt = full_conversation(prompter, whole, messages, replies)
        assert prompt is not None
        if previous is not None:
            assert prompt.tokens[: len(previous)] == previous
        ids = odd_ids(prompter, "Num", f"ber {turn}", "!")
        replies[len(messages)] = ids
        messages += [ChatMessage(role="assistant", content=f"Number {turn}!"), user("And?")]
        previous = (*prompt.tokens, *ids)


def test_a_rendering_that_does_not_begin_with_the_head_has_no_full_prompt(
    whole: WholeSources, prompter: Prompter
):
    text = prompter.render([m.for_template() for m in full_messages(whole, [user("?")])[0]])  # type: ignore[index]
    done = text[: text.index(SENTINEL) + len(SENTINEL)]
    assert start_of(whole, prompter, text) == (whole.tokens, done)
    other = replace(whole, system="Another system prompt.")  # the template renders another head
    assert full_conversation(prompter, other, [user("?")], {}) is None
    assert start_of(whole, prompter, text + SENTINEL) is None  # the mark twice
    assert start_of(whole, prompter, text.replace(SENTINEL, "")) is None


def test_an_answer_is_cited_once_however_many_ask():
    calls: list[str] = []
    found = [Citation(1, 1, "doc-1", "a.txt", None, 0, 4, 1.0, "text")]

    def cite(answer: str) -> list[Citation]:
        calls.append(answer)
        return found

    once = remembered(cite)
    assert once("a") is found and once("a") is found and calls == ["a"]
    once("b")
    assert calls == ["a", "b"]
