"""The native completion request: llama-server's prompt forms and generation_settings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.api.llama_server.native_schemas import JsonPrompt, NativeCompletionRequest


class Vocab:
    """A vocabulary of ten tokens, one per character; 9 ends generation."""

    n_vocab = 10

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        return [ord(c) % 9 for c in text]

    def is_eog(self, token: int) -> bool:
        return token == 9


@pytest.mark.parametrize(
    ("sent", "prompt"),
    [
        ("Hi", "Hi"),
        ([1, 2], [1, 2]),
        (["Hi", 5, " there"], ["Hi", 5, " there"]),  # mixed: one prompt
        ([[1, 2]], [1, 2]),  # a list of one prompt is that prompt
        (["Hi"], "Hi"),
        ([], []),  # refused as empty by the engine, in its words
    ],
)
def test_one_prompt_in_any_of_llama_servers_forms(sent: object, prompt: object):
    request = NativeCompletionRequest(prompt=sent)
    assert request.prompt == prompt and request.prompts() == [prompt]


@pytest.mark.parametrize(
    ("sent", "prompts"),
    [
        (["a", "b"], ["a", "b"]),
        ([[1], [2, "x"]], [[1], [2, "x"]]),
        ([[1], "a"], [[1], "a"]),  # as llama-server: no token id at the top, so several
        ([[1], {"prompt_string": "a"}], [[1], JsonPrompt(prompt_string="a")]),
    ],
)
def test_a_list_without_token_ids_is_several_prompts(sent: object, prompts: object):
    assert NativeCompletionRequest(prompt=sent).prompts() == prompts


def test_a_prompt_object_is_one_prompt():
    request = NativeCompletionRequest(prompt={"prompt_string": "Hi", "multimodal_data": ["eA=="]})
    assert request.prompts() == [JsonPrompt(prompt_string="Hi", multimodal_data=["eA=="])]


@pytest.mark.parametrize("mixed", [[1, [2]], ["a", 1, {"prompt_string": "b"}]])
def test_prompts_mixed_with_the_pieces_of_one_are_refused_in_plain_words(mixed: object):
    with pytest.raises(ValidationError, match="mixes prompts with the pieces of one"):
        NativeCompletionRequest(prompt=mixed)


def test_n_probs_turns_logprobs_on():
    assert NativeCompletionRequest(prompt="x").logprobs_n() is None
    assert NativeCompletionRequest(prompt="x", n_probs=3).logprobs_n() == 3
    with pytest.raises(ValidationError):
        NativeCompletionRequest(prompt="x", n_probs=21)


def test_generation_settings_say_what_the_request_gets():
    body = NativeCompletionRequest(
        prompt="x", temperature=0.2, stop="\n", logit_bias=[[5, False], [7, 1.5]], n_predict=-1
    )
    vocab = Vocab()
    settings = body.settings(42, -1, 0.8, vocab)
    assert settings["seed"] == 42 and settings["temperature"] == 0.2
    assert settings["stop"] == ["\n"] and settings["n_predict"] == -1
    assert settings["logit_bias"] == [{"bias": None, "token": 5}, {"bias": 1.5, "token": 7}]
    seeded = NativeCompletionRequest(prompt="x", n_predict=9, seed=3)
    assert seeded.settings(42, -1, 0.8, vocab)["seed"] == 3
    plain = NativeCompletionRequest(prompt="x", n_predict=9).settings(42, -1, 0.8, vocab)
    assert plain["n_predict"] == 9 and plain["temperature"] == 0.8  # the server's --temp


def test_generation_settings_show_text_biases_by_token_and_ignore_eos_bans():
    body = NativeCompletionRequest(prompt="x", logit_bias={"ab": -2}, ignore_eos=True)
    biases = body.settings(42, -1, 0.8, Vocab())["logit_bias"]
    assert biases == [
        {"bias": -2, "token": ord("a") % 9},
        {"bias": -2, "token": ord("b") % 9},
        {"bias": None, "token": 9},  # ignore_eos bans every end-of-generation token
    ]


def test_probabilities_after_sampling_are_asked_for_and_reported():
    body = NativeCompletionRequest(prompt="x", n_probs=2, post_sampling_probs=True)
    assert body.settings(42, -1, 0.8, Vocab())["post_sampling_probs"] is True
