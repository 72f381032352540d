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

In a collection that blends (its `kv_reuse`, else --kv-reuse), each chunk's own KV (the head,
then the chunk alone: what blend places at any position, app/engine/chunk_blend.py) is computed
the same way, one background request per chunk whose KV no tier holds; the engine keeps it in the
chunk tiers when the request ends. A document's requests are submitted one after another (the
engine's queue stays short however many chunks wait); it is `done` when all have ended. Where the
model's KV cannot move a chunk (no blend), no chunk is computed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from app.db.document_records import ChunkRecord, CollectionRecord
from app.db.document_store import DocumentStore
from app.docs.doc_prompt import DocPrompter
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
        self._state: dict[str, str] = {}  # document id -> queued | done | failed | cached
        # document id -> its requests not submitted yet (present while its prefill runs)
        self._todo: dict[str, list[GenerationRequest]] = {}
        self._failed: set[str] = set()  # documents one of whose requests failed

    @property
    def enabled(self) -> bool:
        return self.max_tokens > 0

    def state(self, document_id: str) -> str | None:
        with self._lock:
            return self._state.get(document_id)

    def forget(self, document_id: str) -> None:
        with self._lock:
            self._state.pop(document_id, None)
            self._todo.pop(document_id, None)
            self._failed.discard(document_id)

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
        prompts: list[tuple[list[int], ChunkKeep | None]] = []
        tokens = self.prompt(head, chunks)
        if tokens is not None and not (if_missing and self._cached(salt, tokens)):
            prompts.append((tokens, None))
        blends = self.blends(collection) and self.engine.blend_unsupported is None
        if blends:
            keep = ChunkKeep(len(head), document_id)
            prompts += [([*head, *c], keep) for c in self._chunks_missing(salt, head, chunks)]
        if not prompts:
            if tokens is not None or blends:
                self._set(document_id, "cached", new=True)
            return
        requests = [self._request(t, salt, document_id, keep) for t, keep in prompts]
        with self._lock:
            if document_id in self._todo:
                return  # queued by another thread meanwhile
            self._state[document_id] = "queued"
            self._todo[document_id] = requests
            self._failed.discard(document_id)
        self._next(document_id)

    def _under_way(self, document_id: str) -> bool:
        with self._lock:
            return document_id in self._todo

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

    def _next(self, document_id: str) -> None:
        """Submit the document's next request, one at a time (the engine runs one background
        task at a time anyway, and its queue stays short however many chunks wait); when none
        is left, the document is done (or failed)."""
        with self._lock:
            todo = self._todo.get(document_id)
            if todo is None:
                return  # deleted meanwhile
            if not todo:
                del self._todo[document_id]
                failed = document_id in self._failed
                self._state[document_id] = "failed" if failed else "done"
                return
            request = todo.pop(0)
        try:
            self.engine.submit(request, lambda event: self._ended(document_id, event))
        except RequestError as e:  # shutting down
            log.info("prefill of %s not queued: %s", document_id, e.message)
            with self._lock:
                self._todo.pop(document_id, None)
            self._set(document_id, "failed")

    def _cached(self, salt: str, tokens: list[int]) -> bool:
        """Whether a cache tier holds the whole prefix (all but the step's last token)."""
        engine = self.engine
        n = engine.call(lambda: engine.cached_length(salt, tokens)).result()
        return n >= len(tokens) - 1

    def _chunks_missing(
        self, salt: str, head: list[int], chunks: list[ChunkRecord]
    ) -> list[list[int]]:
        """The chunks' tokens whose own KV no tier holds, each once, within the budget."""
        fits = [c.token_ids for c in chunks if c.token_ids]
        fits = [t for t in fits if len(head) + len(t) <= self.max_tokens]
        engine = self.engine

        def missing() -> list[list[int]]:
            return [t for t in fits if not engine.has_chunk_kv(salt, head, t)]

        unique = {tuple(t): t for t in engine.call(missing).result()}
        return list(unique.values())

    def _ended(self, document_id: str, event: Event) -> None:  # engine thread
        if isinstance(event, Finished):
            failed = event.finish_reason == "cancelled"
        elif isinstance(event, Failed):
            log.warning("prefill of %s failed: %s", document_id, event.message)
            failed = True
        else:
            return
        if failed:
            with self._lock:
                self._failed.add(document_id)
        self._next(document_id)

    def _set(self, document_id: str, state: str, new: bool = False) -> None:
        with self._lock:
            if new or document_id in self._state:  # not deleted meanwhile
                self._state[document_id] = state
