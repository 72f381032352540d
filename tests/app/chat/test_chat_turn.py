"""A turn built once and answered as several choices (n > 1)."""

from __future__ import annotations

from app.chat.chat_turn import Turn
from app.engine.request import GenerationRequest
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence


def test_another_choice_has_its_own_request_and_shares_what_was_made_once():
    request = GenerationRequest(
        TokenSequence([1, 2, 3]), SamplingParams(temperature=None, grammar="root ::= x")
    )
    turn = Turn(request, "chat", on_end=[print])
    other = turn.another()
    assert other.request is not request and other.request.sampling is not request.sampling
    other.request.sampling.temperature = 0.8  # what the engine fills in stays its own
    other.request.max_tokens = 5
    assert request.sampling.temperature is None and request.max_tokens is None
    assert other.request.prompt is request.prompt and other.request.images is request.images
    assert other.request.sampling.grammar == "root ::= x" and other.on_end == [print]
