"""Which document requests blend chunk KV, and their `BlendPlan` (app/engine/blend_plan.py).

`"kv_reuse": "blend"` on `/ask`, or in a chat's or a session turn's `"rag"` options, asks for
it; a request that does not say takes its collection's `kv_reuse` (a chat's: its first
collection's), and `--kv-reuse` is the default of collections that do not say either. The
chunks' KV is computed after the collection's document head (the head every `/ask` prompt
starts with), so `/ask`, chats and sessions share it; in a chat the chunks' text sits inside a
message, and the plan holds the runs of their stored tokens that the rendered prompt holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.db.documents.document_records import ChunkRecord, CollectionRecord
from app.engine.blend_plan import BlendPlan, find_spans
from app.engine.reuse_kinds import KvReuse
from mm.token_sequence import TokenSequence


def reuse_mode(asked: str | None, collection: CollectionRecord, default: str) -> KvReuse:
    """The request's `kv_reuse`, else the collection's, else --kv-reuse (each a KvReuse name,
    as the request schemas, the database and the settings allow)."""
    return KvReuse(asked or collection.kv_reuse or default)


def wants_blend(asked: str | None, collection: CollectionRecord, default: str) -> bool:
    return reuse_mode(asked, collection, default) is KvReuse.BLEND


def collection_blends(collection: CollectionRecord, default: str) -> bool:
    """Whether requests to this collection that do not say blend (its chunks' KV is wanted)."""
    return wants_blend(None, collection, default)


def blend_plan(head: list[int], chunks: Sequence[ChunkRecord], prompt: TokenSequence) -> BlendPlan:
    """The plan of a prompt that holds these chunks (text prompts only)."""
    pieces = [(c.document_id, c.token_ids) for c in chunks if c.token_ids]
    if prompt.has_media:
        return BlendPlan(list(head))
    return BlendPlan(list(head), find_spans(prompt.text_tokens(0, len(prompt)), pieces))
