"""What a request leaves to the server, filled in as it is validated (llama-server's meanings):
`--temp` for a request without a temperature, `-n` for one without max_tokens (and our
`--max-tokens-limit` as a cap), and a logit bias given for a text put on each of its tokens."""

from __future__ import annotations

from app.engine.engine_config import EngineConfig
from app.engine.request import GenerationRequest
from app.engine.sampler import token_biases
from app.engine.tokenizer import Tokenizer


def apply_defaults(request: GenerationRequest, config: EngineConfig, vocab: Tokenizer) -> None:
    sampling = request.sampling
    if sampling.temperature is None:
        sampling.temperature = config.temperature
    # Tokenized as llama-server does: no special tokens added, none parsed.
    sampling.logit_bias = token_biases(
        sampling.logit_bias, lambda text: vocab.tokenize(text, False, False)
    )
    if request.max_tokens is None and config.n_predict > 0:
        request.max_tokens = config.n_predict
    cap = config.max_tokens_limit
    if cap > 0:
        request.max_tokens = min(request.max_tokens or cap, cap)
