from __future__ import annotations

import pytest

from app.chat.templates.prompter import Prompter
from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model


@pytest.fixture(scope="module")
def prompter(model_path: str):
    model = Model(EngineConfig(model_path=model_path, n_ctx=512, n_parallel=1))
    yield Prompter(model)
    model.close()


def test_turn_continuation_is_what_the_next_turn_puts_after_the_reply(prompter: Prompter):
    cont = prompter.continuation
    assert cont is not None and len(cont) >= 2
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    turn1 = prompter.chat(first).tokens
    reply = "Hello! How can I help?"
    turn2 = prompter.chat(
        [
            *first,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "Tell me a joke."},
        ]
    ).tokens
    reply_tokens = prompter.tokenize(reply).tokens
    # Turn 2 = turn 1 + the reply's tokens + the continuation + the new message.
    n = len(turn1) + len(reply_tokens)
    assert turn2[: len(turn1)] == turn1
    assert turn2[len(turn1) : n] == reply_tokens
    assert list(turn2[n : n + len(cont)]) == cont


def test_rendering_is_deterministic(prompter: Prompter):
    messages = [{"role": "user", "content": "Same words, same tokens."}]
    assert prompter.chat(messages) == prompter.chat(messages)


def test_a_completion_prompt_may_mix_text_and_token_ids(prompter: Prompter):
    whole = prompter.text_prompt("Hello, world").tokens
    (comma,) = prompter.text_prompt(",").tokens[-1:]
    hello = prompter.text_prompt("Hello").tokens
    mixed = prompter.text_prompt(["Hello", comma, " world"]).tokens
    # Only the first text piece gets the leading special tokens (as llama-server tokenizes).
    assert mixed[: len(hello)] == hello and mixed[len(hello)] == comma
    assert mixed == whole
    assert prompter.text_prompt([5, 6]).tokens == (5, 6)
