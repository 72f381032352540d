"""The request fields every generation route shares (`GenerationFields`: OpenAI's sampling and
streaming fields, plus llama-server's extensions: cache_prompt, id_slot, grammar, ...), and the
small models several requests carry (`rag`, `response_format`, NUL-free text).

Unknown fields are ignored, as the OpenAI API and llama-server do, so any OpenAI client works.
Each route's own request adds its fields on these (app/api/openai/openai_schemas.py and the other
*_schemas.py modules).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from app.chat.templates.reasoning import ReasoningAsk
from app.chat.tools import ToolSpec
from app.engine.request import GenerationRequest
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence

T = TypeVar("T")

# Variables the server sets when it renders a chat template.
RESERVED_TEMPLATE_NAMES = frozenset({"messages", "add_generation_prompt", "bos_token", "eos_token"})


def no_reserved_template_names(v: dict[str, Any] | None) -> dict[str, Any] | None:
    """chat_template_kwargs may not stand in for what the server gives the template itself."""
    taken = sorted(RESERVED_TEMPLATE_NAMES & (v or {}).keys())
    if taken:
        raise ValueError(f"{', '.join(taken)} cannot be set through chat_template_kwargs")
    return v


# A request's chat_template_kwargs: more variables for the chat template.
TemplateKwargs = Annotated[dict[str, Any] | None, AfterValidator(no_reserved_template_names)]


class RagOptions(BaseModel):
    """`"rag"` on a chat or session request: answer from these collections' chunks."""

    collection_ids: list[str] = Field(min_length=1, max_length=16)
    top_k: int = Field(default=4, ge=1, le=50)
    document_ids: list[str] | None = Field(default=None, max_length=1000)
    score_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    hybrid: bool = False
    # Chunk KV reused at any position (blend) or along a cached prefix only; None: --kv-reuse.
    kv_reuse: Literal["prefix", "blend"] | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False


class JsonSchemaFormat(BaseModel):
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """OpenAI's response_format: plain text, any JSON object, or JSON following a schema (as
    llama-server, `json_object` may also carry a `schema`)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")

    def schema_or_none(self) -> dict[str, Any] | None:
        if self.type == "json_schema":
            if self.json_schema is None or self.json_schema.schema_ is None:
                raise ValueError('json_schema needs a schema: {"json_schema": {"schema": {...}}}')
            return self.json_schema.schema_
        return self.schema_


class GenerationFields(BaseModel):
    """Fields shared by chat and text completions."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    # llama-server's own name for it (-1: no limit, the server's default then).
    n_predict: int | None = Field(default=None, ge=-1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)  # None: the server's --temp
    top_p: float = Field(default=0.95, ge=0.0, le=1.0)
    top_k: int = Field(default=40, ge=0)
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)
    seed: int | None = None
    repeat_penalty: float = Field(default=1.0, gt=0.0)
    repeat_last_n: int = Field(default=64, ge=-1)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1, le=1, description="only n=1 is supported")
    ignore_eos: bool = False
    # OpenAI's map of token id -> bias (-100..100), or llama-server's [[token id, bias]] pairs
    # where a bias of false bans the token; llama-server also takes a text for a token id,
    # which biases each of its tokens.
    logit_bias: dict[str, float | bool] | list[tuple[int | str, float | bool]] | None = None
    cache_prompt: bool | None = None
    # Tenant isolation (as vLLM's cache_salt): prefixes cached under one salt are never reused
    # under another, so response times reveal nothing across tenants.
    cache_salt: str = Field(default="", max_length=256)
    id_slot: int | None = None
    # Structured output through llama.cpp's grammar sampler (as llama-server): a GBNF grammar,
    # or response_format (converted to one by app/api/structured_output.py).
    response_format: ResponseFormat | None = None
    grammar: str | None = None  # at most --grammar-max-bytes (app/api/grammar/)
    json_schema: dict[str, Any] | None = None  # llama-server's top-level schema field
    # Function calling: chat completions take `tools` (ChatCompletionRequest); elsewhere, and
    # the legacy `functions` everywhere, it is refused with a 400 (app/api/structured_output.py),
    # never silently ignored.
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    takes_tools: ClassVar[bool] = False
    # llama-server's: how the reply's <think> block is returned (the server's
    # --reasoning-format when left out), and extra variables for the chat template.
    reasoning_format: Literal["none", "deepseek", "deepseek-legacy", "auto"] | None = None
    chat_template_kwargs: TemplateKwargs = None
    # Work done once per request however many generations it makes (n choices, a list of
    # prompts), by name: app/api/structured_output.py's grammar and logit biases.
    _once: dict[str, asyncio.Future[Any]] = PrivateAttr(default_factory=dict)

    def once(self, name: str, work: Callable[[], T]) -> Awaitable[T]:
        """`work` in a worker thread, run once for this body: every caller awaits its result."""
        if name not in self._once:
            self._once[name] = asyncio.ensure_future(asyncio.to_thread(work))
        return self._once[name]

    def reasoning_ask(self) -> ReasoningAsk:
        return ReasoningAsk(self.reasoning_format, self.chat_template_kwargs)

    @model_validator(mode="before")
    @classmethod
    def _nulls_mean_default(cls, data: object) -> object:
        # The OpenAI API lets clients send null for optional fields; null means "the default".
        # id_slot -1 means "any slot" in llama-server.
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v is not None}
            if isinstance(data.get("id_slot"), int) and data["id_slot"] < 0:
                del data["id_slot"]
        return data

    @model_validator(mode="after")
    def _stop_list(self) -> GenerationFields:
        if isinstance(self.stop, list) and len(self.stop) > 4:
            raise ValueError("at most 4 stop sequences")
        return self

    @field_validator("logit_bias")
    @classmethod
    def _bias_pairs_in_range(
        cls, v: dict[str, float | bool] | list[tuple[int | str, float | bool]]
    ) -> list[tuple[int | str, float | bool]]:
        """Checked, and kept in llama-server's pair form whichever form came (a key of digits
        is a token id, any other a text)."""
        if isinstance(v, dict):
            v = [(int(k) if k.lstrip("-").isdigit() else k, bias) for k, bias in v.items()]
        for _, bias in v:
            if bias is True:
                raise ValueError("a logit bias is a number, or false to ban the token")
            if bias is not False and not -100.0 <= float(bias) <= 100.0:
                raise ValueError(f"a logit bias must be between -100 and 100, got {bias}")
        return v

    def bias_pairs(self) -> tuple[tuple[int | str, float], ...]:
        """(token or text, bias) of logit_bias; a ban (false, or -100 as OpenAI means it) is
        -inf. The engine turns a text into its tokens."""
        pairs = self.logit_bias or []  # pairs whichever form came (the validator's)
        ban = float("-inf")
        return tuple((t, ban if b is False or float(b) <= -100.0 else float(b)) for t, b in pairs)

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    def token_limit(self) -> int | None:
        n_predict = self.n_predict if self.n_predict is not None and self.n_predict > 0 else None
        return self.max_completion_tokens or self.max_tokens or n_predict

    def sampling(self, default_seed: int = -1) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            seed=self.seed if self.seed is not None else default_seed,
            repeat_penalty=self.repeat_penalty,
            repeat_last_n=self.repeat_last_n,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            logit_bias=self.bias_pairs(),
        )

    def generation(
        self, prompt: TokenSequence, default_seed: int, **more: Any
    ) -> GenerationRequest:
        """The engine's request for this body's fields (`more`: fields set by the route)."""
        return GenerationRequest(
            prompt=prompt,
            sampling=self.sampling(default_seed),
            max_tokens=self.token_limit(),
            stop=self.stop_list(),
            ignore_eos=self.ignore_eos,
            cache_prompt=self.cache_prompt,
            cache_salt=self.cache_salt,
            id_slot=self.id_slot,
            logprobs=self.logprobs_n(),
            **more,
        )

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def logprobs_n(self) -> int | None:
        """None: no logprobs; n: each token's logprob and the n most likely alternatives."""
        return None

    def tool_specs(self) -> list[ToolSpec]:
        return []

    def calls_allowed(self) -> bool:
        """Whether the reply may hold tool calls (they are looked for in it)."""
        return False

    def forced_calls(self) -> list[ToolSpec] | None:
        """The tools the reply must call one of (its grammar), or None."""
        return None

    def parallel_calls(self) -> bool:
        return False


# The sampling settings llama-server reports (GET /props, a native completion's
# generation_settings), which our fields share the names of.
SETTING_NAMES = ("temperature", "top_k", "top_p", "min_p", "repeat_last_n", "repeat_penalty")
SETTING_NAMES += ("presence_penalty", "frequency_penalty", "ignore_eos", "stream")


def default_params(seed: int, n_predict: int, temperature: float) -> dict[str, Any]:
    """The sampling a request gets for what it leaves out (GET /props), in llama-server's
    names."""
    fields = GenerationFields.model_fields
    params: dict[str, Any] = {name: fields[name].default for name in SETTING_NAMES}
    params["temperature"] = temperature
    return {"seed": seed, **params, "n_predict": n_predict, "max_tokens": n_predict}


def no_nul(value: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL; refusing it everywhere keeps both backends alike.
    if value is not None and "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    return value


NulFreeText = Annotated[str, AfterValidator(no_nul)]
