"""`GenerationRequest`: what the HTTP layer asks the engine for, already tokenized."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.sampler import SamplingParams
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
    cache_salt: str = ""  # tenant key: KV cached under one salt is never reused under another
    logprobs: int | None = None  # None: off; n: report each token's logprob and the n best
    # Tokens a conversation puts after a reply that ended on end-of-generation (for a chat
    # template: end of turn, then the next user header). When the reply ends on continuation[0],
    # the idle slot prefills them so the next turn evaluates only the new message.
    continuation: list[int] | None = None


class RequestError(ValueError):
    """A request the engine refuses before queueing it; the HTTP layer maps it to a 4xx."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str = "invalid_request_error",
        status: int = 400,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.status = status
