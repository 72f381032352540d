"""The native completion request: llama-server's prompt forms and generation_settings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.api.native_schemas import NativeCompletionRequest


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
    [(["a", "b"], ["a", "b"]), ([[1], [2, "x"]], [[1], [2, "x"]])],
)
def test_a_list_of_strings_or_of_lists_is_several_prompts(sent: object, prompts: object):
    assert NativeCompletionRequest(prompt=sent).prompts() == prompts


@pytest.mark.parametrize("mixed", [[[1], "a"], ["a", [1, 2]]])
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
    settings = body.settings(seed=42, n_predict=-1)
    assert settings["seed"] == 42 and settings["temperature"] == 0.2
    assert settings["stop"] == ["\n"] and settings["n_predict"] == -1
    assert settings["logit_bias"] == [{"bias": None, "token": 5}, {"bias": 1.5, "token": 7}]
    assert NativeCompletionRequest(prompt="x", n_predict=9, seed=3).settings(42, -1)["seed"] == 3
    assert NativeCompletionRequest(prompt="x", n_predict=9).settings(42, -1)["n_predict"] == 9


def test_probabilities_after_sampling_are_refused_not_ignored():
    with pytest.raises(ValidationError, match="after sampling are not supported"):
        NativeCompletionRequest(prompt="x", n_probs=2, post_sampling_probs=True)
    assert NativeCompletionRequest(prompt="x", post_sampling_probs=False).n_probs == 0
