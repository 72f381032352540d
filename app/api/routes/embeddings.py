"""`POST /v1/embeddings` (OpenAI's shape), served by the documents' embedder: the vectors are
the ones `/search` compares (app/docs/text_embeddings.py does the work, off the event loop)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from app.api.embedding_schemas import EmbeddingRequest, embedding_list
from app.api.lookups import DocsDep
from app.api.services import ServicesDep
from app.docs.text_embeddings import embed_texts

router = APIRouter()

MODEL = "all-MiniLM-L6-v2"  # the packaged model's name (another --embedding-model: its path)


@router.post("/v1/embeddings")
@router.post("/embeddings", include_in_schema=False)  # llama-server serves both paths
async def embeddings(body: EmbeddingRequest, docs: DocsDep, services: ServicesDep):
    done = await asyncio.to_thread(embed_texts, docs.library, body.texts(), body.dimensions)
    name = services.settings.embedding_model or MODEL
    return embedding_list(done.vectors, body.encoding_format, name, done.tokens)
