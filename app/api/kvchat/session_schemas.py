"""Request schemas of the sessions API: a stored conversation's creation, changes, fork, and
the messages (and regenerations) posted to it.

A session may store sampling defaults (the fields of SESSION_DEFAULT_FIELDS); they are checked
when stored, not on every turn.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from app.api.schemas import GenerationFields, NulFreeText, RagOptions, no_nul
from app.chat.messages import ChatMessage, ContentPart

# Sampling defaults a session may store; a message request's own fields override them.
SESSION_DEFAULT_FIELDS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "repeat_penalty",
        "repeat_last_n",
        "frequency_penalty",
        "presence_penalty",
        "max_tokens",
        "stop",
        "cache_salt",
        "reasoning_format",
        "chat_template_kwargs",
    }
)


def _check_sampling(sampling: dict[str, Any] | None) -> None:
    if sampling is None:
        return
    unknown = sorted(set(sampling) - SESSION_DEFAULT_FIELDS)
    if unknown:
        raise ValueError(
            f"unknown sampling fields {unknown}; allowed: {sorted(SESSION_DEFAULT_FIELDS)}"
        )
    GenerationFields.model_validate(sampling)  # values are checked now, not per turn


class ImportedMessage(BaseModel):
    """A message of an imported conversation (the UI's export format)."""

    role: Literal["user", "assistant"]
    content: NulFreeText | list[ContentPart]


# A model's name: in router mode, one of its models (app/router/model_catalog.py).
ModelName = Annotated[NulFreeText, Field(min_length=1, max_length=255)]


class CreateSessionRequest(BaseModel):
    # The session's model: this server's (router mode: the model whose server it goes to, and
    # where its turns go when they name none). Unset: this server's.
    model: ModelName | None = None
    system_prompt: NulFreeText | None = None
    title: NulFreeText | None = Field(default=None, max_length=200)
    sampling: dict[str, Any] = Field(default_factory=dict)
    # An imported history (export/import as JSON); a new session has none.
    messages: list[ImportedMessage] = Field(default_factory=list, max_length=10000)

    @model_validator(mode="after")
    def _known_sampling(self) -> CreateSessionRequest:
        _check_sampling(self.sampling)
        return self


class UpdateSessionRequest(BaseModel):
    """PATCH: the fields sent are changed (null clears title or system prompt), the rest kept.
    `sampling` replaces the stored defaults as a whole; `model` moves the conversation to that
    model (router mode: the PATCH goes to its server), null: to none (a router's default)."""

    model: ModelName | None = None
    system_prompt: NulFreeText | None = None
    title: NulFreeText | None = Field(default=None, max_length=200)
    sampling: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _known_sampling(self) -> UpdateSessionRequest:
        _check_sampling(self.sampling)
        return self


class ForkSessionRequest(BaseModel):
    """A new session holding the history before `message_id` (a branch at that message)."""

    message_id: int
    title: NulFreeText | None = Field(default=None, max_length=200)


class RegenerateRequest(GenerationFields):
    """Answer the last user message again (its reply is replaced): sampling overrides, and the
    `rag` to answer it with (as a message takes it; none: the message as stored)."""

    rag: RagOptions | None = None


class SessionMessageRequest(GenerationFields):
    """A new user message for a stored session; fields left out take the session's defaults."""

    role: Literal["user"] = "user"
    content: NulFreeText | list[ContentPart]
    rag: RagOptions | None = None  # answer from these collections' documents

    @model_validator(mode="after")
    def _parts_without_nul(self) -> SessionMessageRequest:
        no_nul(self.text())
        return self

    def text(self) -> str:
        return ChatMessage(role="user", content=self.content).text()

    def has_images(self) -> bool:
        return ChatMessage(role="user", content=self.content).has_images()
