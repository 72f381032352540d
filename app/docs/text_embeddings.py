"""Texts to vectors for `POST /v1/embeddings`: the documents' embedder (the one `/search` and
ingestion use, so a client's vectors compare with the stored ones), in batches, each text checked
to fit the model whole.

Blocking (tokenizer and model): call `embed_texts` from a worker thread. A request's batches run
one after another and the embedder's lock is let go between them, so a long request never keeps
a search query waiting for all of it. This is a client's own request, like a search query: it
does not wait for the engine to be quiet as ingestion (background work) does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.docs.library import DocLibrary
from app.engine.request import RequestError

BATCH = 32  # texts per call of the embedder


@dataclass(slots=True)
class Embedded:
    vectors: np.ndarray  # (n, dim) float32, each row of norm 1
    tokens: int  # the model's tokens of all the texts


def embed_texts(library: DocLibrary, texts: list[str], dimensions: int | None = None) -> Embedded:
    """`dimensions`: what the client asked for; the model makes vectors of one size only."""
    embedder = library.embedder()
    if dimensions is not None and dimensions != embedder.dim:
        raise RequestError(
            f"dimensions: this embedding model makes vectors of {embedder.dim} dimensions only",
            param="dimensions",
            code="unsupported_parameter",
        )
    param = "input"
    counts = embedder.token_counts(texts)
    limit = embedder.max_tokens
    for i, n in enumerate(counts):
        if n > limit:
            where = param if len(texts) == 1 else f"{param}[{i}]"
            raise RequestError(
                f"{where} is too large: {n} tokens; the embedding model takes at most {limit} "
                "(split the text)",
                param=where,
            )
    parts = [embedder.embed(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)]
    vectors = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), np.float32)
    return Embedded(vectors, sum(counts))
