"""llama-server's native completion request (`POST /completion`, `/completions`): a raw prompt
and llama-server's own field names, on the fields every generation route shares.

Unknown fields (llama-server's samplers this server has not got: mirostat, dry_*, xtc_*, ...)
are ignored, as llama-server ignores the fields it does not know.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from app.api.schemas import SETTING_NAMES, GenerationFields
from app.engine.sampler import token_biases
from app.engine.tokenizer import Tokenizer, eog_tokens

# One prompt: text, token ids, or text and token ids mixed (llama-server's three forms).
Prompt = str | list[int | str]

# The order our sampler applies its stages in (app/engine/sampler.py), in llama-server's names.
SAMPLERS = ["penalties", "top_k", "top_p", "min_p", "temperature"]


class NativeCompletionRequest(GenerationFields):
    # One prompt, or several (a list of strings or of lists); `prompts()` tells them apart.
    prompt: Prompt | list[Prompt]
    # Each generated token's probability and the n most likely tokens at its step.
    n_probs: int = Field(default=0, ge=0, le=20)
    return_tokens: bool = False  # the generated token ids in `tokens` (always in a stream)
    timings_per_token: bool = False  # `timings` in every streamed chunk
    return_progress: bool = False  # a `prompt_progress` chunk once the prompt is evaluated
    # Probabilities after the sampling settings: this server reports them before (false).
    post_sampling_probs: bool = False

    @field_validator("post_sampling_probs")
    @classmethod
    def _before_sampling(cls, v: bool) -> bool:
        if v:
            raise ValueError(
                "probabilities after sampling are not supported: send it false or leave it out "
                "(n_probs reports log-probabilities under the model, before sampling)"
            )
        return v

    @field_validator("prompt")
    @classmethod
    def _prompt_forms(cls, p: Prompt | list[Prompt]) -> Prompt | list[Prompt]:
        """llama-server's forms: a string, token ids, or ids and strings mixed are one prompt;
        a list of strings, or of such lists, is several (a list of one is that prompt)."""
        if isinstance(p, str):
            return p
        if len(p) == 1 and isinstance(p[0], list | str):
            return p[0]  # type: ignore[return-value]
        nested = [piece for piece in p if isinstance(piece, list)]
        if nested and len(nested) != len(p):
            raise ValueError(
                "a prompt is a string, a list of token ids and strings, or a list of prompts; "
                "this list mixes prompts with the pieces of one"
            )
        return p  # an empty list is refused as an empty prompt by the engine, in its words

    def prompts(self) -> list[Prompt]:
        """The prompts, in order; one for all forms but a list of strings or of lists."""
        p = self.prompt
        if isinstance(p, str) or not p:
            return [p]  # type: ignore[list-item]
        if all(isinstance(piece, list) for piece in p) or all(isinstance(x, str) for x in p):
            return list(p)  # type: ignore[arg-type]
        return [p]  # type: ignore[list-item]

    def logprobs_n(self) -> int | None:
        return self.n_probs or None

    def settings(
        self, seed: int, n_predict: int, temperature: float, vocab: Tokenizer
    ) -> dict[str, Any]:
        """llama-server's `generation_settings`: what this request was generated with (the
        server's seed, -n and --temp where it gives none; the logit biases by token, a text's
        on each of its tokens, and ignore_eos's ban of the end-of-generation tokens)."""
        n = self.token_limit() or n_predict
        biases = token_biases(self.bias_pairs(), lambda text: vocab.tokenize(text, False, False))
        if self.ignore_eos:
            biases += tuple((t, float("-inf")) for t in eog_tokens(vocab))
        return {
            "seed": self.seed if self.seed is not None else seed,
            **{name: getattr(self, name) for name in SETTING_NAMES},
            "temperature": temperature if self.temperature is None else self.temperature,
            "stop": self.stop_list(),
            "max_tokens": n,
            "n_predict": n,
            # llama-server's form; a ban is its -infinity, which JSON writes as null
            "logit_bias": [
                {"bias": b if b > float("-inf") else None, "token": t} for t, b in biases
            ],
            "n_probs": self.n_probs,
            "grammar": self.grammar or "",
            "samplers": SAMPLERS,
            "timings_per_token": self.timings_per_token,
            "post_sampling_probs": False,
        }


def _bias(b: float) -> float | None:
    return b if b > float("-inf") else None
