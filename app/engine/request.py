"""`GenerationRequest`: what the HTTP layer asks the engine for, already tokenized."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.blend_plan import BlendPlan, ChunkKeep
from app.engine.sampler import SamplingParams
from mm.mtmd_bridge import ImageChunk
from mm.token_sequence import TokenSequence


@dataclass(slots=True)
class GenerationRequest:
    prompt: TokenSequence
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int | None = None  # None: until EOS or the context is full
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    cache_prompt: bool | None = None  # None: the server default
    id_slot: int | None = None  # pin to this slot (waits for it if busy)
    # Conversation the request belongs to: it goes back to the slot that holds its KV when that
    # slot is idle (slot affinity), and no other conversation takes a slot it could avoid taking.
    session: str | None = None
    cache_salt: str = ""  # tenant key: KV cached under one salt is never reused under another
    logprobs: int | None = None  # None: off; n: report each token's logprob and the n best
    # llama-server's post_sampling_probs: with `logprobs`, probabilities after the sampling
    # settings in their place (app/engine/llama/sampled_probs.py).
    post_sampling: bool = False
    timings_per_token: bool = False  # each TextDelta carries the timings so far
    # Tokens a conversation puts after a reply that ended on end-of-generation (for a chat
    # template: end of turn, then the next user header). When the reply ends on continuation[0],
    # the idle slot prefills them so the next turn evaluates only the new message.
    continuation: list[int] | None = None
    # The image chunks of the prompt's media, by id (from Vision.tokenize): what the engine
    # evaluates when a media chunk of the prompt is not in the slot's KV.
    images: dict[str, ImageChunk] = field(default_factory=dict)
    # Ids of the documents whose chunks the prompt holds (RAG): the KV built from it carries
    # them into every cache tier, so deleting a document can drop all of it.
    documents: frozenset[str] = frozenset()
    # The request field errors about the prompt name: "messages" (chat), "prompt", "content".
    prompt_param: str = "messages"
    # Speculative work nobody waits for (a document's prefill into the prefix cache at ingest):
    # admitted only while no client request waits or runs, never counted against --max-queue,
    # never timed out.
    background: bool = False
    # `"kv_reuse": "blend"`: the chunks' KV is reused wherever the prompt places them
    # (app/engine/blend/chunk_blend.py); such a request also takes blended KV as a prefix.
    blend: BlendPlan | None = None
    # A background request computing one chunk's own KV for blend: kept in the chunk tiers when
    # it ends (app/engine/blend/chunk_blend.py, `keep`).
    keep_chunk: ChunkKeep | None = None

    @property
    def approximate(self) -> bool:
        """Whether blended (approximate) KV may serve this request."""
        return self.blend is not None

    def check(
        self,
        n_ctx: int,
        n_vocab: int,
        n_slots: int,
        vision: bool = False,
        n_ctx_total: int | None = None,
    ) -> None:
        """Raise RequestError for what this server cannot serve (nothing is queued then).
        n_ctx: the KV cells one request may use; n_ctx_total: the whole context's."""
        prompt = self.prompt
        if len(prompt) == 0:
            raise RequestError("the prompt is empty", param=self.prompt_param)
        if prompt.has_media:
            if not vision:
                raise no_projector(self.prompt_param)
            if any(chunk.id not in self.images for _, chunk in prompt.media()):
                raise RequestError("an image of the prompt was not given", param=self.prompt_param)
            if prompt.chunk_containing(len(prompt) - 1) is not None:
                raise RequestError("the prompt must not end with an image", param=self.prompt_param)
        # Length first: a huge prompt is refused without walking its tokens.
        if len(prompt) >= n_ctx:
            raise RequestError(
                f"the request exceeds the available context size: the prompt has {len(prompt)} "
                f"tokens and a request may use {n_ctx} of the context's {n_ctx_total or n_ctx}",
                param=self.prompt_param,
                code="exceed_context_size_error",
                # llama-server's error type and figures, which its clients read
                fields={
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": len(prompt),
                    "n_ctx": n_ctx,
                },
            )
        try:
            prompt.validate(n_vocab)
        except ValueError as e:
            raise RequestError(f"invalid prompt tokens: {e}", param=self.prompt_param) from e
        if self.id_slot is not None and not 0 <= self.id_slot < n_slots:
            raise RequestError(
                f"id_slot {self.id_slot} does not exist: this server has slots 0..{n_slots - 1}",
                param="id_slot",
            )
        for token, _ in self.sampling.logit_bias:
            if not 0 <= token < n_vocab:
                raise RequestError(
                    f"logit_bias names token {token}, which is not in the model's vocabulary "
                    f"(0..{n_vocab - 1})",
                    param="logit_bias",
                )
        if self.logprobs is not None and not 0 <= self.logprobs <= 20:
            raise RequestError("top_logprobs must be between 0 and 20", param="top_logprobs")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise RequestError("max_tokens must be at least 1", param="max_tokens")


def no_projector(param: str) -> RequestError:
    return RequestError(
        "image input needs a multimodal projector: start the server with --mmproj", param=param
    )


class RequestError(ValueError):
    """A request the engine refuses before queueing it; the HTTP layer maps it to a 4xx."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str = "invalid_request_error",
        status: int = 400,
        headers: dict[str, str] | None = None,
        fields: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.status = status
        self.headers = headers  # e.g. Retry-After on 503
        self.fields = fields or {}  # more of the error object (e.g. llama-server's figures)
