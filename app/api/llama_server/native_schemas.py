"""llama-server's native completion request (`POST /completion`, `/completions`): a raw prompt
and llama-server's own field names, on the fields every generation route shares.

Unknown fields (llama-server's samplers this server has not got: mirostat, dry_*, xtc_*, ...)
are ignored, as llama-server ignores the fields it does not know.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.schemas import SETTING_NAMES, GenerationFields
from app.engine.sampler import token_biases
from app.engine.tokenizer import Tokenizer, eog_tokens


class JsonPrompt(BaseModel):
    """llama-server's prompt object: the text (or ids and text mixed), and the images of a
    multimodal prompt, base64."""

    model_config = ConfigDict(extra="ignore")

    prompt_string: str | list[int | str]
    multimodal_data: list[str] | None = None


# One prompt: text, token ids, text and token ids mixed, or an object (llama-server's forms).
Prompt = str | list[int | str] | JsonPrompt

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
    # n_probs as probabilities after the sampling settings (`prob`, `top_probs`) instead of
    # log-probabilities under the model.
    post_sampling_probs: bool = False

    @field_validator("prompt", mode="before")
    @classmethod
    def _not_mixed(cls, p: object) -> object:
        ids = isinstance(p, list) and any(isinstance(x, int) for x in p)
        if ids and any(isinstance(x, list | dict) for x in p):  # type: ignore[union-attr]
            raise ValueError(
                "a prompt is a string, a list of token ids and strings, or a list of prompts; "
                "this list mixes prompts with the pieces of one"
            )
        return p

    @field_validator("prompt")
    @classmethod
    def _prompt_forms(cls, p: Prompt | list[Prompt]) -> Prompt | list[Prompt]:
        """llama-server's forms: a string, an object, or a list holding token ids (ids and
        strings mixed) is one prompt; any other list is several (a list of one is that
        prompt)."""
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], list | str | JsonPrompt):
            return p[0]
        return p  # an empty list is refused as an empty prompt by the engine, in its words

    def prompts(self) -> list[Prompt]:
        """The prompts, in order; one for all forms but a list without token ids in it."""
        p = self.prompt
        if isinstance(p, str | JsonPrompt) or not p or any(isinstance(x, int) for x in p):
            return [p]  # type: ignore[list-item]
        return list(p)  # type: ignore[arg-type]

    def logprobs_n(self) -> int | None:
        return self.n_probs or None

    def settings(
        self,
        seed: int,
        n_predict: int,
        temperature: float,
        vocab: Tokenizer,
        biases: tuple[tuple[int | str, float], ...] | None = None,
    ) -> dict[str, Any]:
        """llama-server's `generation_settings`: what this request was generated with (the
        server's seed, -n and --temp where it gives none; the logit biases by token, a text's
        on each of its tokens, and ignore_eos's ban of the end-of-generation tokens).
        `biases`: the request's, by token already (else this body's, tokenized here)."""
        n = self.token_limit() or n_predict
        if biases is None:
            biases = self.bias_pairs()
        biases = token_biases(biases, lambda text: vocab.tokenize(text, False, False))
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
            "post_sampling_probs": self.post_sampling_probs,
        }


def _bias(b: float) -> float | None:
    return b if b > float("-inf") else None
