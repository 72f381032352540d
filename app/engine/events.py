"""What the engine sends back for a request: text deltas, then exactly one Finished or Failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.reuse_kinds import TIERS, CacheSource, KvReuse


@dataclass(slots=True)
class Timings:
    """llama-server's `timings` object; cache_n + prompt_n = prompt tokens."""

    cache_n: int = 0  # prompt tokens reused from the KV cache
    prompt_n: int = 0  # prompt tokens evaluated for this request
    prompt_ms: float = 0.0
    predicted_n: int = 0
    predicted_ms: float = 0.0
    slot: int = -1
    cache_source: CacheSource = CacheSource.NONE
    # Submission -> first generated token, as the engine saw it (None: no token). Unstreamed
    # requests get their text only at the end, so this is their time to first token.
    ttft_ms: float | None = None
    # Of cache_n: tokens placed from chunk KV (blend) and not computed for this request.
    chunk_n: int = 0
    kv_reuse: KvReuse | None = None  # when the request asked for blend
    kv_reuse_reason: str | None = None  # why blend fell back to prefix reuse
    # Blend against full prefill on the quality set at this k (app/engine/blend/blend_gate.py), sent
    # with every blended reply: None there when the model was never measured (--blend-force).
    kv_reuse_agreement: dict[str, float | int] | None = None
    # Speculative decoding: tokens drafted, and of those the ones the model agreed with.
    draft_n: int = 0
    draft_n_accepted: int = 0

    def as_dict(self) -> dict[str, float | int]:
        # As llama-server: times in whole microseconds and the rates from those, and generation
        # rates over decode steps, one fewer than the tokens: the first token comes from the
        # logits of the prompt's last batch.
        prompt_ms, predicted_ms = round(self.prompt_ms, 3), round(self.predicted_ms, 3)
        steps = max(self.predicted_n - 1, 0)

        def per_token(ms: float, n: int) -> float:
            return ms / n if n else 0.0

        def per_second(ms: float, n: int) -> float:
            return 1e3 / ms * n if ms > 0 else 0.0

        prefix_n = self.cache_n - self.chunk_n
        reuse: dict[str, object] = {"kv_reuse": self.kv_reuse.value} if self.kv_reuse else {}
        if self.kv_reuse_reason is not None:
            reuse["kv_reuse_reason"] = self.kv_reuse_reason
        if self.kv_reuse is KvReuse.BLEND:
            reuse["kv_reuse_agreement"] = self.kv_reuse_agreement
        # As llama-server: only for a request that drafted.
        draft = (
            {"draft_n": self.draft_n, "draft_n_accepted": self.draft_n_accepted}
            if self.draft_n
            else {}
        )
        return {
            "id_slot": self.slot,
            "cache_n": self.cache_n,
            # cached tokens by where they came from; chunk: blended chunk KV
            "cache_sources": {
                **{src.value: prefix_n if src is self.cache_source else 0 for src in TIERS},
                "chunk": self.chunk_n,
            },
            **reuse,
            "prompt_n": self.prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": per_token(prompt_ms, self.prompt_n),
            "prompt_per_second": per_second(prompt_ms, self.prompt_n),
            "predicted_n": self.predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": per_token(predicted_ms, steps),
            "predicted_per_second": per_second(predicted_ms, steps),
            **draft,
        }


@dataclass(slots=True)
class TokenLogprob:
    """A generated token's log-probability under the model (before sampling settings), and the
    most likely alternatives at that step, as OpenAI's `logprobs` reports them."""

    token: str
    logprob: float
    bytes: list[int]
    top: list[tuple[str, float, list[int]]]
    id: int = -1  # the token's id (llama-server's n_probs name each token by it)
    top_ids: list[int] = field(default_factory=list)  # the ids of `top`, in its order


@dataclass(slots=True)
class TextDelta:
    text: str
    tokens: list[int]  # the tokens whose text this delta completes
    logprobs: list[TokenLogprob] | None = None
    # The request's timings so far, for a request that asks for them (`timings_per_token`).
    timings: Timings | None = None


@dataclass(slots=True)
class Finished:
    finish_reason: str  # "stop" | "length" | "cancelled"
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    timings: Timings
    stop_sequence: str | None = None  # the stop string that ended it, if one did


@dataclass(slots=True)
class Failed:
    message: str
    status: int = 500
    code: str = "server_error"


Event = TextDelta | Finished | Failed
