from __future__ import annotations

from app.chat.sessions.conversation import conversation_prompt
from app.chat.templates.prompter import Prompter
from app.engine.llama.model import Model


def odd_ids(prompter: Prompter, *pieces: str) -> list[int]:
    """Ids for text the tokenizer would split differently: what a model may generate."""
    return [t for p in pieces for t in prompter.extend([0], "x", "x" + p)[1:]]


def test_reply_ids_are_spliced_in_even_when_they_are_not_how_text_tokenizes(
    prompter: Prompter, model: Model
):
    reply_ids = odd_ids(prompter, "El", "ena", " is", " here")
    reply = "Elena is here"
    assert prompter.matches(reply_ids, reply)
    assert prompter.tokenize(reply).tokens != tuple(reply_ids)  # the case this is for

    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who?"}]
    turn1 = conversation_prompt(prompter, history, {}).tokens
    assert turn1 == prompter.chat(history).tokens

    history2 = [
        *history,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Ok"},
    ]
    turn2 = conversation_prompt(prompter, history2, {2: reply_ids}).tokens
    # Turn 2 extends turn 1 + the generated ids token for token.
    assert turn2[: len(turn1) + len(reply_ids)] == (*turn1, *reply_ids)
    # Same text as the template renders.
    assert model.detokenize(list(turn2), special=True) == prompter.render(history2)


def test_every_turn_extends_the_previous_turn_and_reply(prompter: Prompter):
    messages: list[dict[str, str]] = [{"role": "user", "content": "Count with me."}]
    replies: dict[int, list[int]] = {}
    previous: tuple[int, ...] | None = None
    for turn in range(4):
        prompt = conversation_prompt(prompter, messages, replies).tokens
        if previous is not None:
            assert prompt[: len(previous)] == previous
        ids = odd_ids(prompter, "Num", f"ber {turn}", "!")
        replies[len(messages)] = ids
        messages.append({"role": "assistant", "content": f"Number {turn}!"})
        messages.append({"role": "user", "content": f"And after {turn}?"})
        previous = (*prompt, *ids)


def test_a_reply_the_template_does_not_render_verbatim_falls_back_to_text(
    prompter: Prompter, model: Model
):
    # The stored ids are for other text than the message holds: not spliced (text wins).
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ]
    wrong = odd_ids(prompter, "Good", "bye")
    prompt = conversation_prompt(prompter, messages, {1: wrong}).tokens
    assert model.detokenize(list(prompt), special=True) == prompter.render(messages)
