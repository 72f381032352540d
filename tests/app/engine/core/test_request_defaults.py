"""What a request leaves to the server, filled in as it is validated."""

from __future__ import annotations

from app.engine.core.request_defaults import apply_defaults
from app.engine.engine_config import EngineConfig
from app.engine.request import GenerationRequest
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence


class Vocab:
    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        assert not add_special and not parse_special  # as llama-server tokenizes bias texts
        return [len(word) for word in text.split()]


def request(**sampling: object) -> GenerationRequest:
    return GenerationRequest(prompt=TokenSequence([1, 2]), sampling=SamplingParams(**sampling))


def test_temperature_and_max_tokens_default_to_the_servers():
    config = EngineConfig(model_path="m.gguf", temperature=0.3, n_predict=12)
    given, left = request(temperature=1.1), request(temperature=None)
    for r in (given, left):
        apply_defaults(r, config, Vocab())  # type: ignore[arg-type]
    assert given.sampling.temperature == 1.1 and left.sampling.temperature == 0.3
    assert left.max_tokens == 12


def test_a_text_bias_goes_on_each_of_its_tokens():
    r = request(logit_bias=((7, 1.0), ("ab cde", float("-inf"))))
    apply_defaults(r, EngineConfig(model_path="m.gguf"), Vocab())  # type: ignore[arg-type]
    assert r.sampling.logit_bias == ((7, 1.0), (2, float("-inf")), (3, float("-inf")))
