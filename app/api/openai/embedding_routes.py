"""`POST /v1/embeddings` (OpenAI's shape), served by the documents' embedder: the vectors are
the ones `/search` compares (app/docs/text_embeddings.py does the work, off the event loop)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from app.api.lookups import DocsDep
from app.api.openai.embedding_schemas import EmbeddingRequest, embedding_list
from app.api.services import ServicesDep
from app.docs.text_embeddings import embed_texts
from app.engine.request import RequestError

router = APIRouter()

MODEL = "all-MiniLM-L6-v2"  # the packaged model's name (another --embedding-model: its path)


@router.post("/v1/embeddings")
@router.post("/embeddings", include_in_schema=False)  # llama-server serves both paths
async def embeddings(body: EmbeddingRequest, docs: DocsDep, services: ServicesDep):
    vocab = services.engine.tokenizer  # token ids are the chat model's, read back to text

    def detokenize(ids: list[int]) -> str:
        if not all(0 <= t < vocab.n_vocab for t in ids):
            raise RequestError(
                f"input: token ids are this server's model's (0..{vocab.n_vocab - 1})",
                param="input",
            )
        return vocab.detokenize(ids)

    texts = body.texts(detokenize)
    done = await asyncio.to_thread(embed_texts, docs.library, texts, body.dimensions)
    name = services.settings.embedding_model or MODEL
    return embedding_list(done.vectors, body.encoding_format, name, done.tokens)
