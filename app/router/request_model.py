"""Which model a request is for, as llama-server's router reads it: the `model` of a JSON body,
else the `model` query parameter (a GET's). A body that is not a JSON object (an upload, a form
that is not JSON) names none.
"""

from __future__ import annotations

import json
from collections import OrderedDict

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
    name its model (a session's turn and a collection's question may have theirs remembered:
    app/router/owner_routing.py). Others (media, reading sessions and collections) are any model
    server's to answer."""
    path = path.rstrip("/")
    if method != "POST":
        return path.startswith(PER_MODEL_READS)
    if path.startswith("/slots"):
        return True
    session_turn = path.startswith("/v1/sessions/") and path.endswith(("/messages", "/regenerate"))
    question = path.startswith("/v1/collections/") and path.endswith("/ask")
    counts = path.endswith(("/input_tokens", "/count_tokens"))
    return path in MODEL_ROUTES or session_turn or question or counts


CONVERSATION_HEADER = "x-conversation-id"
STREAM_PATHS = ("/v1/stream",)


class ConversationModels:
    """Which model a resumable stream's conversation (`X-Conversation-Id`) was sent to, so that
    `GET`/`DELETE /v1/stream?conv_id=` reach that model's server, where the stream is kept; the
    most recent `size` conversations (llama-server's router keeps the same map)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._models: OrderedDict[str, str] = OrderedDict()

    def remember(self, conv_id: str, model: str) -> None:
        self._models[conv_id] = model
        self._models.move_to_end(conv_id)
        while len(self._models) > self.size:
            self._models.popitem(last=False)

    def model_of(self, conv_id: str) -> str | None:
        return self._models.get(conv_id)
