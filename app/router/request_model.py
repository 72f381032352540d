"""Which model a request is for, as llama-server's router reads it: the `model` of a JSON body,
else the `model` query parameter (a GET's). A body that is not a JSON object (an upload, a form
that is not JSON) names none.
"""

from __future__ import annotations

import json

# The routes that run the model: without a model named, llama-server's router refuses them.
MODEL_ROUTES = (
    "/completion",
    "/completions",
    "/v1/completions",
    "/chat/completions",
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/responses",
    "/responses",
    "/tokenize",
    "/detokenize",
    "/apply-template",
    "/infill",
    "/embedding",
    "/embeddings",
    "/v1/embeddings",
)


def named_model(body: bytes, query_model: str | None) -> str | None:
    if body[:1] in (b"{", b" ", b"\n", b"\t", b"\r"):
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("model"), str) and data["model"]:
            return data["model"]
    return query_model or None


# Per-model state: which model's is asked must be said.
PER_MODEL_READS = ("/slots", "/metrics")


def needs_model(method: str, path: str) -> bool:
    """A request that runs a model (token counting too) or reads one model's state: it must
    name its model. Others (sessions, media, collections) are any model server's to answer."""
    path = path.rstrip("/")
    if method != "POST":
        return path.startswith(PER_MODEL_READS)
    if path.startswith("/slots"):
        return True
    session_turn = path.startswith("/v1/sessions/") and path.endswith("/messages")
    counts = path.endswith(("/input_tokens", "/count_tokens"))
    return path in MODEL_ROUTES or session_turn or counts
