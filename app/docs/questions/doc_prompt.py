"""`DocPrompter`: the token pieces around a document question's retrieved chunks.

The chat template is rendered once with a sentinel where the chunks go (at the start of the user
turn, after a fixed instruction); the text before it is the head, the text after it (the
question, the end of the turn, the assistant header) the tail. The chunks' stored token ids are
spliced between them, so they are never re-tokenized with their neighbours.
"""

from __future__ import annotations

from app.chat.templates.prompter import Prompter
from app.engine.tokenizer import Tokenizer

SENTINEL = "kvchatSOURCESsentinel"
DEFAULT_SYSTEM_PROMPT = (
    "You answer questions from the numbered sources you are given. Cite the sources you use by "
    "their number, like [1]. If the sources do not hold the answer, say so."
)
INSTRUCTION = "Sources:\n\n"
QUESTION = "Question: "


def token_counter(tokenizer: Tokenizer):  # noqa: ANN201 (a plain callable)
    return lambda text: tokenizer.tokenize(text, add_special=False, parse_special=False)


class DocPrompter:
    def __init__(self, prompter: Prompter, tokenizer: Tokenizer) -> None:
        self.prompter = prompter
        self.tokenizer = tokenizer

    def parts(self, system_prompt: str | None, question: str) -> tuple[list[int], list[int]]:
        """(head, tail) token ids of a document question's prompt."""
        messages = [
            {"role": "system", "content": system_prompt or DEFAULT_SYSTEM_PROMPT},
            {"role": "user", "content": INSTRUCTION + SENTINEL + QUESTION + question},
        ]
        text = self.prompter.render(messages)
        at = text.index(SENTINEL)
        head = list(self.prompter.tokenize(text[:at]).tokens)
        rest = text[at + len(SENTINEL) :]
        tail = self.tokenizer.tokenize(rest, add_special=False, parse_special=True)
        return head, tail
