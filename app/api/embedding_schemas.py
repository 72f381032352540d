"""`POST /v1/embeddings`'s request (OpenAI's shape) and its answer."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_INPUTS = 2048  # OpenAI's own bound on the items of one request
# A text to embed: not empty, no NUL (the schema says what the validator checks).
Text = Annotated[str, Field(min_length=1, pattern=r"^[^\x00]*\S[^\x00]*$")]


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input: Text | Annotated[list[Text], Field(min_length=1, max_length=MAX_INPUTS)] = Field(
        description="a text or a list of texts (token ids are refused)"
    )
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _texts(cls, v: Any) -> Any:
        """Checked before the types, so a wrong kind of input gets words of its own."""
        if not isinstance(v, str | list):
            return v  # the type error says what is expected
        items = [v] if isinstance(v, str) else v
        if not items:
            raise ValueError("must not be empty: send a text or a list of texts")
        if not all(isinstance(i, str) for i in items):
            raise ValueError("token ids are not supported: send the texts themselves")
        if len(items) > MAX_INPUTS:
            raise ValueError(f"at most {MAX_INPUTS} texts per request, got {len(items)}")
        for i, text in enumerate(items):
            if not text.strip():
                where = "" if isinstance(v, str) else f"item {i} "
                raise ValueError(f"{where}must not be empty or blank text")
            if "\x00" in text:
                raise ValueError("text must not contain NUL characters")
        return v

    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)  # type: ignore[arg-type]


def embedding_list(vectors: np.ndarray, encoding: str, model: str, tokens: int) -> dict[str, Any]:
    """OpenAI's answer: one embedding object per input, in order; base64 is the float32
    little-endian bytes of each vector (what the OpenAI SDK decodes)."""
    data = []
    for i, row in enumerate(vectors):
        if encoding == "base64":
            value: Any = base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
        else:
            value = row.tolist()
        data.append({"object": "embedding", "index": i, "embedding": value})
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
