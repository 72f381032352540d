"""llama-server's native completion request (`POST /completion`, `/completions`): a raw prompt
and llama-server's own field names, on the fields every generation route shares.

Unknown fields (llama-server's samplers this server has not got: mirostat, dry_*, xtc_*, ...)
are ignored, as llama-server ignores the fields it does not know.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from app.api.schemas import SETTING_NAMES, GenerationFields

# One prompt: text, token ids, or text and token ids mixed (llama-server's three forms).
Prompt = str | list[int | str]

# The order our sampler applies its stages in (app/engine/sampler.py), in llama-server's names.
SAMPLERS = ["penalties", "top_k", "top_p", "min_p", "temperature"]


class NativeCompletionRequest(GenerationFields):
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
    def _one_prompt(cls, p: Prompt | list[Prompt]) -> Prompt:
        """llama-server answers a list of prompts with a list of results; this server
        answers one prompt per request (a list of one is that prompt)."""
        if isinstance(p, str):
            return p
        if len(p) == 1 and isinstance(p[0], list):
            p = p[0]
        if any(isinstance(piece, list) for piece in p):
            raise ValueError(
                "only one prompt per request is supported: send each prompt in a request of "
                "its own (a list of token ids and strings is one prompt)"
            )
        if len(p) > 1 and all(isinstance(piece, str) for piece in p):
            raise ValueError(
                "only one prompt per request is supported: send each prompt in a request of "
                "its own (a list of strings is several prompts)"
            )
        return p[0] if len(p) == 1 and isinstance(p[0], str) else p  # type: ignore[return-value]

    def logprobs_n(self) -> int | None:
        return self.n_probs or None

    def settings(self, seed: int, n_predict: int) -> dict[str, Any]:
        """llama-server's `generation_settings`: what this request was generated with."""
        n = self.token_limit() or n_predict
        return {
            "seed": self.seed if self.seed is not None else seed,
            **{name: getattr(self, name) for name in SETTING_NAMES},
            "stop": self.stop_list(),
            "max_tokens": n,
            "n_predict": n,
            # llama-server's form; a ban (false) is its -infinity, which JSON writes as null
            "logit_bias": [
                {"bias": None if b is False else b, "token": t} for t, b in self.logit_bias or []
            ],
            "n_probs": self.n_probs,
            "grammar": self.grammar or "",
            "samplers": SAMPLERS,
            "timings_per_token": self.timings_per_token,
            "post_sampling_probs": False,
        }
