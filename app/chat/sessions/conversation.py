"""Token-exact prompts for a stored conversation: each turn's prompt extends the previous
turn's prompt and reply token for token, so the whole history is reused from the KV.

Re-tokenizing a reply's text need not give the ids the model generated (it generated `El|ena`,
the tokenizer gives `E|len|a`), and the first difference ends the reusable prefix at the start of
that reply. So the prompt is assembled from pieces: the template's text up to each reply,
tokenized as a continuation, then the reply's own generated ids. Built the same way every turn
from the same history, turn N+1 extends turn N exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.chat.templates.prompter import Prompter
from mm.token_sequence import TokenSequence


def conversation_prompt(
    prompter: Prompter,
    messages: list[dict[str, Any]],
    replies: Mapping[int, list[int]],
    start: tuple[list[int], str] | None = None,
) -> TokenSequence:
    """Prompt for `messages` (template dicts, ending with the new user message), with the
    generated ids of the assistant messages at the indexes in `replies` spliced in. `start`:
    (tokens, text) the prompt begins with, the tokens standing for that text wherever the
    rendered messages begin with it (a collection's whole prefix: app/chat/full_prompt.py).

    A reply is spliced only if the template renders the history as a plain extension: the
    text up to the reply, then the text its ids spell, verbatim (a template that leaves a reply's
    reasoning out of the history renders something else there); otherwise that part is
    tokenized from text, which is still correct, only less reusable.
    """
    full = prompter.render(messages)
    tokens, done = (list(start[0]), start[1]) if start is not None else ([], "")
    # `done`: the text whose tokens are `tokens`
    for i in sorted(replies):
        head = prompter.render(messages[:i], add_generation_prompt=True)
        spelled = prompter.text_of(replies[i])
        if spelled is None:
            continue
        reply = head + spelled
        if not (head.startswith(done) and full.startswith(reply)):
            continue
        tokens = prompter.extend(tokens, done, head)
        tokens.extend(replies[i])
        done = reply
    return TokenSequence(prompter.extend(tokens, done, full))
