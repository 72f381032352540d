"""Request bodies of the document endpoints and their JSON answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas import GenerationFields, NulFreeText
from app.db.documents.document_records import ChunkRecord, CollectionRecord, DocumentRecord
from app.docs.background.collection_prefill import FullPrefixStatus
from app.docs.background.doc_prefill import KvProgress
from app.engine.sampler import SamplingParams
from rag.chunker import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS

SAMPLING_TOP_K = 40  # /ask's `top_k` is the number of chunks; sampling keeps its default
CollectionMode = Literal["retrieval", "full"]


class CreateCollectionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: NulFreeText = Field(min_length=1, max_length=200)
    chunk_tokens: int = Field(default=DEFAULT_CHUNK_TOKENS, ge=16, le=2048)
    overlap_tokens: int = Field(default=DEFAULT_OVERLAP_TOKENS, ge=0)
    system_prompt: NulFreeText | None = Field(default=None, max_length=20000)
    # How its questions and chats reuse chunk KV when they do not say; None: the server's
    # --kv-reuse (docs/blend.md).
    kv_reuse: Literal["prefix", "blend"] | None = None
    # The collection's model: this server's (router mode: the model whose server it goes to;
    # its documents are ingested in that model's tokens, and its requests go there when they
    # name none). Unset: this server's.
    model: NulFreeText | None = Field(default=None, min_length=1, max_length=255)
    # What a question that does not say puts before it: the best chunks, or every ready
    # document (docs/documents.md, Full-document mode).
    mode: CollectionMode = "retrieval"

    @model_validator(mode="after")
    def _overlap_below_size(self) -> CreateCollectionRequest:
        if self.overlap_tokens >= self.chunk_tokens // 2:
            raise ValueError("overlap_tokens must be less than half of chunk_tokens")
        return self


class UpdateCollectionRequest(BaseModel):
    """PATCH /v1/collections/{id}: the fields sent change, the others stay (null is a value
    only for `kv_reuse`, meaning --kv-reuse)."""

    model_config = ConfigDict(extra="forbid")

    name: NulFreeText | None = Field(default=None, min_length=1, max_length=200)
    mode: CollectionMode | None = None
    kv_reuse: Literal["prefix", "blend"] | None = None

    @model_validator(mode="after")
    def _not_null(self) -> UpdateCollectionRequest:
        for name in ("name", "mode"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        return self

    def changes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.model_fields_set}


class TextDocumentRequest(BaseModel):
    filename: NulFreeText = Field(min_length=1, max_length=255)
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchFields(BaseModel):
    model_config = ConfigDict(extra="ignore")

    top_k: int = Field(default=4, ge=1, le=100)
    score_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    document_ids: list[str] | None = Field(default=None, max_length=1000)
    hybrid: bool = False


class SearchRequest(SearchFields):
    query: NulFreeText = Field(min_length=1, max_length=20000)


class AskRequest(GenerationFields):
    """A question about a collection: the search fields plus the sampling fields."""

    question: NulFreeText = Field(min_length=1, max_length=20000)
    top_k: int = Field(default=4, ge=1, le=100)
    score_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    document_ids: list[str] | None = Field(default=None, max_length=1000)
    hybrid: bool = False
    kv_reuse: Literal["prefix", "blend"] | None = None  # None: the server's --kv-reuse
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)  # answers from sources: greedy
    # full: every ready document before the question; None: the collection's mode.
    mode: CollectionMode | None = None
    # retrieval: a full-mode question whose collection does not fit is answered by retrieval
    # instead of refused (400 collection_too_long).
    fallback: Literal["retrieval"] | None = None

    def sampling(self, default_seed: int = -1) -> SamplingParams:
        params = super().sampling(default_seed)
        params.top_k = SAMPLING_TOP_K
        return params


def collection_json(c: CollectionRecord, full: FullPrefixStatus | None = None) -> dict[str, Any]:
    """`full`: its whole prefix's state (full-document mode); None on a server that has none
    (reported empty)."""
    full = full or FullPrefixStatus("empty", 0, 0, 0)
    return {
        "id": c.id,
        "object": "collection",
        "name": c.name,
        "chunk_tokens": c.chunk_tokens,
        "overlap_tokens": c.overlap_tokens,
        "system_prompt": c.system_prompt,
        "n_documents": c.n_documents,
        "embedding_backend": c.embedding_backend,
        "kv_reuse": c.kv_reuse,
        "model": c.model,
        "mode": c.mode,
        "full_prefix": {
            "state": full.state,
            "tokens": full.tokens,
            "cached_tokens": full.cached_tokens,
            "n_ctx": full.n_ctx,
        },
        "created_at": int(c.created_at.timestamp()),
    }


def document_json(
    d: DocumentRecord,
    duplicate: bool = False,
    prefill: str | None = None,
    kv: KvProgress | None = None,
) -> dict[str, Any]:
    """`prefill`: queued | done | failed while this process prefills the document into the
    prefix cache (--doc-prefill-tokens), cached when a tier held it at start-up; null
    otherwise. `kv`: in a collection that blends, its chunks' own KV (pending | running | done |
    failed, chunks done of total) once its prefill is queued; null otherwise. `ocr_pages`: the
    pages whose text OCR read; `ocr_failed`: those it could not, each with why."""
    ready = d.status == "ready"
    ocr = d.ocr
    return {
        "id": d.id,
        "object": "document",
        "collection_id": d.collection_id,
        "filename": d.filename,
        "sha256": d.sha256,
        "status": d.status,
        "progress": {
            "chunks_done": d.chunks_done,
            "chunks_total": d.chunks_total,
            "ocr_pages_done": 0 if ocr is None else ocr.done,
            "ocr_pages_total": 0 if ocr is None else ocr.total,
        },
        "error": d.error,
        "ocr_pages": [] if ocr is None else ocr.pages,
        "ocr_failed": []
        if ocr is None
        else [{"page": f.page, "reason": f.reason} for f in ocr.failed],
        "duplicate": duplicate,
        "n_chunks": d.chunks_total if ready else 0,
        "n_tokens": d.n_tokens,
        "metadata": d.metadata,
        "prefill": prefill,
        "kv": None if kv is None else kv_json(kv),
        "created_at": int(d.created_at.timestamp()),
    }


def kv_json(kv: KvProgress) -> dict[str, Any]:
    return {"state": kv.state, "chunks_total": kv.chunks_total, "chunks_done": kv.chunks_done}


def chunk_id(c: ChunkRecord) -> str:
    return f"chunk-{c.id}"


def chunk_json(c: ChunkRecord) -> dict[str, Any]:
    return {
        "id": chunk_id(c),
        "object": "chunk",
        "document_id": c.document_id,
        "filename": c.filename,
        "ordinal": c.ordinal,
        "index": c.number,
        "page": c.page,
        "char_start": c.char_start,
        "char_end": c.char_end,
        "text": c.text,
        "n_tokens": len(c.token_ids) if c.token_ids is not None else None,
    }


def hit_json(c: ChunkRecord, score: float) -> dict[str, Any]:
    return {
        "chunk_id": chunk_id(c),
        "document_id": c.document_id,
        "filename": c.filename,
        "ordinal": c.ordinal,
        "page": c.page,
        "char_start": c.char_start,
        "char_end": c.char_end,
        "score": score,
        "text": c.text,
    }
