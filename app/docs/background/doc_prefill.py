"""`DocPrefill`: a ready document's prompt prefix computed into the prefix cache ahead of questions.

Every document question starts with the same head (system prompt, "Sources:") followed by the
retrieved chunks, and the first question that retrieves a chunk pays for its prefill cold (the
rate: docs/kv-reuse.md, Measurements). When a document becomes ready, its head + chunks in
canonical order (up to --doc-prefill-tokens) are computed by a background engine task, which the
scheduler admits only while no client request waits or runs. The layout puts cached chunks
first, so a later question whose retrieved set holds the document's leading chunks reuses them:
its prompt starts with exactly these tokens (the same head, the chunks' stored token ids).

The KV lives in the slot that computed it and goes to host memory when that slot is needed, like
any slot's. The task carries the document's id, so deleting the document purges that KV too. A
document's state (`queued`, `done`, `failed`, `cached`) is kept for this process only. At
start-up (`start`), every ready document whose prefix no cache tier holds (the disk tier keeps
it across a restart) is queued again; the others are `cached`.

In a collection that blends (its `kv_reuse`, else --kv-reuse), each chunk's own KV (the head, then
the chunk alone: what blend places at any position, app/engine/blend/chunk_blend.py) is computed the
same way, one background request per chunk whose KV no tier holds; the engine keeps it in the chunk
tiers when the request ends. A document is `done` when all its requests have ended; its chunk KV's
progress (`kv`) says how many of its chunks a tier holds. Where the model's KV cannot
move a chunk (no blend), no chunk is computed.

Requests go to the engine one at a time, whatever the number of documents (the engine runs one
background task at a time anyway, and its queue stays short): every document's prefix first, in
the order they became ready (the first question on any of them reuses it), then their chunks,
document by document, so documents finish in order and each reports steady progress.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from app.db.documents.document_records import ChunkRecord, CollectionRecord
from app.db.documents.document_store import DocumentStore
from app.docs.questions.doc_prompt import DocPrompter
from app.engine.background_tasks import TASK_KINDS
from app.engine.blend_plan import ChunkKeep
from app.engine.engine import Engine
from app.engine.events import Event, Failed, Finished
from app.engine.request import GenerationRequest, RequestError
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence

log = logging.getLogger(__name__)

SaltOf = Callable[[str], str]  # tenant id -> the salt of its cache keys
ReadyDocuments = Callable[[], list[tuple[CollectionRecord, str]]]
Blends = Callable[[CollectionRecord], bool]  # whether a collection's questions blend


@dataclass(slots=True)
class KvProgress:
    """A document's chunk KV (blend), as `GET /v1/documents/{id}` reports it."""

    state: str  # pending | running | done | failed
    chunks_total: int  # its chunks that get KV of their own (within --doc-prefill-tokens)
    chunks_done: int  # of those, held by a cache tier (computed now, or found there)


@dataclass(slots=True)
class _Work:
    """One document's background requests not yet submitted, and how far it got."""

    state: str  # queued | done | failed | cached: the document's `prefill`
    prefix: GenerationRequest | None = None  # its prefix, unless submitted or not wanted
    # Its chunks' requests, each with how many of the document's chunks it computes (equal
    # chunks share one).
    chunks: list[tuple[GenerationRequest, int]] = field(default_factory=list)
    blends: bool = False  # its chunks get KV of their own
    chunks_total: int = 0
    chunks_done: int = 0
    chunks_started: bool = False
    failed: bool = False  # one of its requests failed
    chunks_failed: bool = False

    @property
    def waiting(self) -> bool:
        return self.prefix is not None or bool(self.chunks)

    def progress(self, busy: bool) -> KvProgress | None:
        if not self.blends:
            return None
        if self.waiting or busy:
            state = "running" if self.chunks_started else "pending"
        else:
            state = "failed" if self.chunks_failed else "done"
        return KvProgress(state, self.chunks_total, self.chunks_done)


class DocPrefill:
    def __init__(
        self,
        engine: Engine,
        store: DocumentStore,
        prompts: DocPrompter,
        model_key: str,
        salt_of: SaltOf,
        max_tokens: int,
        ready_documents: ReadyDocuments = list,
        blends: Blends = lambda collection: False,
    ) -> None:
        self.engine, self.store, self.prompts = engine, store, prompts
        self.ready_documents, self.blends = ready_documents, blends
        self.model_key, self.salt_of = model_key, salt_of
        # A prefill never fills a request's whole context: it must leave room for a question.
        self.max_tokens = min(max_tokens, engine.n_ctx_request // 2)
        self._lock = threading.Lock()
        self._work: dict[str, _Work] = {}  # document id -> its work, in the order it came
        self._busy: str | None = None  # the document whose request the engine has now

    @property
    def enabled(self) -> bool:
        return self.max_tokens > 0

    def state(self, document_id: str) -> str | None:
        with self._lock:
            work = self._work.get(document_id)
            return work.state if work is not None else None

    def kv(self, document_id: str) -> KvProgress | None:
        """Its chunk KV's progress; None unless its chunks get KV of their own here."""
        with self._lock:
            work = self._work.get(document_id)
            return work.progress(self._busy == document_id) if work is not None else None

    def pending(self) -> dict[str, int]:
        """Requests not yet handed to the engine, by kind (app/engine/background_tasks.py)."""
        counts = dict.fromkeys(TASK_KINDS, 0)
        with self._lock:
            for work in self._work.values():
                counts["prefill"] += work.prefix is not None
                counts["chunk_kv"] += len(work.chunks)
        return counts

    def forget(self, document_id: str) -> None:
        with self._lock:
            self._work.pop(document_id, None)

    def prompt(self, head: list[int], chunks: list[ChunkRecord]) -> list[int] | None:
        """Head + the document's chunks in order, whole chunks only, within the budget."""
        tokens = list(head)
        for c in chunks:
            if c.token_ids is None or len(tokens) + len(c.token_ids) > self.max_tokens:
                break
            tokens.extend(c.token_ids)
        return tokens if len(tokens) > len(head) else None

    def start(self) -> None:
        """Queue, on a thread of its own, the prefill of every ready document whose prefix no
        cache tier holds (after a restart only the disk tier may)."""
        if self.enabled:
            threading.Thread(target=self._prefill_ready, name="doc-prefill", daemon=True).start()

    def _prefill_ready(self) -> None:
        try:
            for collection, document_id in self.ready_documents():
                self.document_ready(collection, document_id, if_missing=True)
        except Exception:  # the server runs on; these documents are prefilled when asked
            log.exception("could not queue the prefill of the ready documents")

    def document_ready(
        self, collection: CollectionRecord, document_id: str, if_missing: bool = False
    ) -> None:
        """Queue the document's prefill (any thread); nothing when off, nothing fits, or its
        prefill is under way already. `if_missing`: not when a cache tier holds its prefix
        already (state `cached`); chunk KV is computed only where no tier holds it."""
        if not self.enabled or self._under_way(document_id):
            return
        chunks = self.store.chunks(collection.tenant_id, document_id, self.model_key)
        if not chunks:
            return  # deleted meanwhile
        head, _ = self.prompts.parts(collection.system_prompt, "")
        salt = self.salt_of(collection.tenant_id)
        work = _Work(
            "queued", blends=self.blends(collection) and self.engine.blend_unsupported is None
        )
        tokens = self.prompt(head, chunks)
        if tokens is not None and not (if_missing and self._cached(salt, tokens)):
            work.prefix = self._request(tokens, salt, document_id, None)
        if work.blends:
            keep = ChunkKeep(len(head), document_id)
            work.chunks_total, missing = self._chunks_missing(salt, head, chunks)
            work.chunks_done = work.chunks_total - sum(n for _, n in missing)
            work.chunks = [
                (self._request([*head, *t], salt, document_id, keep), n) for t, n in missing
            ]
        if not work.waiting:
            if tokens is None and not work.blends:
                return
            work.state = "cached"
        with self._lock:
            if self._under_way(document_id, locked=True):
                return  # queued by another thread meanwhile
            self._work.pop(document_id, None)  # a document prefilled again goes last
            self._work[document_id] = work
        self._pump()

    def _under_way(self, document_id: str, locked: bool = False) -> bool:
        if not locked:
            with self._lock:
                return self._under_way(document_id, locked=True)
        work = self._work.get(document_id)
        return self._busy == document_id or (work is not None and work.waiting)

    @staticmethod
    def _request(
        tokens: list[int], salt: str, document_id: str, keep: ChunkKeep | None
    ) -> GenerationRequest:
        return GenerationRequest(
            TokenSequence(tokens),
            SamplingParams(temperature=0.0, seed=0),
            max_tokens=1,  # the KV of the prompt is the point; the token is thrown away
            cache_salt=salt,
            documents=frozenset({document_id}),
            background=True,
            keep_chunk=keep,
        )

    def _pump(self) -> None:
        """Hand the engine the next request unless it has one of ours already: the first
        document's prefix that waits, else the first document's chunk that waits."""
        while True:
            with self._lock:
                if self._busy is not None:
                    return
                picked = self._pick()
                if picked is None:
                    return
                document_id, request, n = picked
                self._busy = document_id
            try:
                self.engine.submit(request, partial(self._ended, document_id, n))
                return
            except RequestError as e:  # shutting down
                log.info("prefill of %s not queued: %s", document_id, e.message)
                with self._lock:
                    self._busy = None
                    work = self._work.get(document_id)
                    if work is not None:
                        work.prefix, work.chunks, work.state = None, [], "failed"

    def _pick(self) -> tuple[str, GenerationRequest, int] | None:
        """(document, request, chunks it computes: 0 for a prefix); under the lock."""
        for document_id, work in self._work.items():
            if work.prefix is not None:
                request, work.prefix = work.prefix, None
                return document_id, request, 0
        for document_id, work in self._work.items():
            if work.chunks:
                work.chunks_started = True
                request, n = work.chunks.pop(0)
                return document_id, request, n
        return None

    def _cached(self, salt: str, tokens: list[int]) -> bool:
        """Whether a cache tier holds the whole prefix (all but the step's last token)."""
        engine = self.engine
        n = engine.call(lambda: engine.cached_length(salt, tokens)).result()
        return n >= len(tokens) - 1

    def _chunks_missing(
        self, salt: str, head: list[int], chunks: list[ChunkRecord]
    ) -> tuple[int, list[tuple[list[int], int]]]:
        """How many chunks get KV of their own (within the budget), and the tokens of those
        whose KV no tier holds, each once, with how many of the chunks they are."""
        fits = [c.token_ids for c in chunks if c.token_ids]
        fits = [t for t in fits if len(head) + len(t) <= self.max_tokens]
        engine = self.engine

        def missing() -> list[list[int]]:
            return [t for t in fits if not engine.has_chunk_kv(salt, head, t)]

        counts = Counter(tuple(t) for t in engine.call(missing).result())
        return len(fits), [(list(t), n) for t, n in counts.items()]

    def _ended(self, document_id: str, n: int, event: Event) -> None:  # engine thread
        if isinstance(event, Finished):
            failed = event.finish_reason == "cancelled"
        elif isinstance(event, Failed):
            log.warning("prefill of %s failed: %s", document_id, event.message)
            failed = True
        else:
            return
        with self._lock:
            self._busy = None
            work = self._work.get(document_id)  # None: deleted meanwhile
            if work is not None:
                work.failed |= failed
                work.chunks_failed |= failed and n > 0
                work.chunks_done += 0 if failed else n
                if not work.waiting:
                    work.state = "failed" if work.failed else "done"
        self._pump()
