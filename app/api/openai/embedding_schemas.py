"""`POST /v1/embeddings`'s request (OpenAI's shape) and its answer."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_INPUTS = 2048  # OpenAI's own bound on the items of one request

# One input, in llama-server's forms: a text, token ids (ids and texts mixed), or an object
# with a `prompt_string` or text `content` parts.
Piece = int | str
Input = str | list[Piece] | dict[str, Any]


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input: Input | list[Input] = Field(
        description="a text, token ids of this server's model, a {prompt_string} or {content: "
        "[text parts]} object, or a list of those"
    )
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _inputs(cls, v: Any) -> Any:
        """Checked before the types, so a wrong kind of input gets words of its own."""
        items = _items(v)
        if not items:
            raise ValueError("must not be empty: send a text or a list of texts")
        if len(items) > MAX_INPUTS:
            raise ValueError(f"at most {MAX_INPUTS} texts per request, got {len(items)}")
        for i, item in enumerate(items):
            where = "" if len(items) == 1 and not isinstance(v, list) else f"item {i} "
            problem = _problem(item)
            if problem:
                raise ValueError(where + problem)
        return v

    def texts(self, detokenize: Callable[[list[int]], str]) -> list[str]:
        """Each input's text (token ids read with `detokenize`: this server's model's)."""
        return [_text(item, detokenize) for item in _items(self.input)]


def _items(v: Any) -> list[Any]:
    """The inputs: a list holding token ids is one input (ids and texts mixed), as
    llama-server reads it; any other list is several."""
    if isinstance(v, list) and not any(_is_id(x) for x in v):
        return v
    return [v]


def _is_id(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _problem(item: Any) -> str | None:
    if isinstance(item, str):
        return "must not contain NUL characters" if "\x00" in item else None
    if isinstance(item, list):
        if all(
            isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool)) for x in item
        ):
            return None
        return "must be a text, token ids and texts, or an object"
    if isinstance(item, dict):
        if isinstance(item.get("prompt_string"), str):
            return None
        parts = item.get("content")
        if isinstance(parts, list) and parts:
            kinds = {p.get("type") if isinstance(p, dict) else None for p in parts}
            if kinds == {"text"} and all(isinstance(p.get("text"), str) for p in parts):
                return None
            return "content takes text parts only (this embedder reads text)"
        return "an object takes a prompt_string or a list of text content parts"
    return "must be a text, token ids, or an object"


def _text(item: Any, detokenize: Callable[[list[int]], str]) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        if isinstance(item.get("prompt_string"), str):
            return item["prompt_string"]
        return "".join(p["text"] for p in item["content"])
    text, ids = "", []  # runs of ids read together, so pieces join as the model spells them
    for x in [*item, ""]:
        if isinstance(x, str):
            text += (detokenize(ids) if ids else "") + x
            ids = []
        else:
            ids.append(x)
    return text


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
