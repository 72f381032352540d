"""A conversation after its collections' whole prefix: full-document mode in chats and sessions.

A full-mode collection's prefix (app/docs/questions/collection_prefix.py) is the chat template's
rendering of the document head (the collection's system message, then a user message opened
by "Sources:") followed by every chunk's stored token ids; the background computes it once and
every question of the tenant reuses it. For a chat turn to reuse it too, its prompt must begin
with exactly those tokens, so the conversation is not rendered on its own but as what follows
them: the head's system message comes first, the first user message opens with the sources
(the chunks' place marked), then carries the conversation's own system prompt and the user's
words; the other messages follow as they are. The template renders that once, the text up to
the mark must tokenize to the prefix's head, and only the text after it is tokenized (as a
continuation, like a question's tail), after the prefix's own ids. A rendering that does not
begin with the head (tools or template variables that the template puts in the system message,
a conversation that does not start with a user message) has no such prompt: None, and the turn
is answered by retrieval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.chat.messages import ChatMessage
from app.chat.sessions.conversation import conversation_prompt
from app.chat.templates.prompter import Prompter
from app.chat.turn_sources import Citation, WholeSources
from mm.token_sequence import TokenSequence

SYSTEM_ROLES = ("system", "developer")
Cite = Callable[[str], list[Citation]]


def full_messages(
    whole: WholeSources, messages: list[ChatMessage]
) -> tuple[list[ChatMessage], int] | None:
    """The conversation as it follows the prefix, and how far the index of each message after
    the first user message moves; None when there is no text-only user message after the
    leading system messages to open with the sources."""
    lead = 0
    while lead < len(messages) and messages[lead].role in SYSTEM_ROLES:
        lead += 1
    if lead == len(messages) or messages[lead].role != "user" or messages[lead].has_images():
        return None
    own = "\n\n".join(t for t in (m.text() for m in messages[:lead]) if t)
    first = whole.opening + (own + "\n\n" if own else "") + whole.question + messages[lead].text()
    opened = [
        ChatMessage(role="system", content=whole.system),
        ChatMessage(role="user", content=first),
    ]
    return [*opened, *messages[lead + 1 :]], 1 - lead


def start_of(whole: WholeSources, prompter: Prompter, text: str) -> tuple[list[int], str] | None:
    """(the prefix's tokens, the rendered text they stand for): `text` up to the end of the
    mark. None unless the mark is there once and the text before it is the prefix's head."""
    at = text.find(whole.marker)
    if at < 0 or text.count(whole.marker) != 1:
        return None
    if list(prompter.tokenize(text[:at]).tokens) != whole.tokens[: whole.head]:
        return None
    return whole.tokens, text[: at + len(whole.marker)]


def full_conversation(
    prompter: Prompter,
    whole: WholeSources,
    messages: list[ChatMessage],
    replies: Mapping[int, list[int]],
) -> TokenSequence | None:
    """A stored conversation's prompt after the prefix (CPU work: a worker thread), replies'
    generated ids spliced in as app/chat/sessions/conversation.py does, so the next turn's
    prompt extends this one's; `replies` by the index of `messages`."""
    shaped = full_messages(whole, messages)
    if shaped is None:
        return None
    opened, shift = shaped
    template: list[dict[str, Any]] = [m.for_template() for m in opened]
    start = start_of(whole, prompter, prompter.render(template))
    if start is None:
        return None
    moved = {i + shift: ids for i, ids in replies.items() if i + shift >= 2}
    return conversation_prompt(prompter, template, moved, start)


def fits(whole: WholeSources, prompt: TokenSequence, answer_limit: int | None) -> bool:
    """Whether the prompt (the prefix and the conversation) leaves the answer its room."""
    return whole.over(len(prompt) - len(whole.tokens), answer_limit) <= 0


def remembered(cite: Cite) -> Cite:
    """`cite`, run once per answer: the reply's last chunk and its stored copy both ask."""
    last: list[tuple[str, list[Citation]]] = []

    def once(answer: str) -> list[Citation]:
        if last and last[0][0] == answer:
            return last[0][1]
        found = cite(answer)
        last[:] = [(answer, found)]
        return found

    return once
