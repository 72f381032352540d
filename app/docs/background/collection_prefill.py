"""`CollectionPrefill`: a full-mode collection's whole prefix computed into the prefix cache.

In full mode every question of a collection starts with the same tokens: the document head and
every ready chunk in the collection's stable order (app/docs/questions/collection_prefix.py).
When that prefix changes (a document of the collection is made ready or deleted, the collection
is switched to full mode) or after a restart, it is computed by one background engine task,
which the scheduler admits only while no client request waits or runs, under the tenant's salt:
every question from any session or API key of the tenant then computes only itself, whichever
slot or tier (host memory, disk) holds the prefix by then. A document added at the end makes a
prefix that extends the cached one, so the task computes only the new tail; the engine's prefix
reuse finds the rest.

The task carries the ids of every document in the prefix: deleting any of them drops that KV
from every tier (the guarantee of every document request), and the prefix is computed again
without it, from what a tier still holds of its start. A collection whose prefix no longer fits
the context one request may use (--doc-full-reserve kept free) is not computed.

One thread takes the collections in the order they changed, one task at a time; a collection
that changes while its task runs is taken again after it. States (`status`) are this process's.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from app.db.documents.document_records import CollectionRecord
from app.docs.questions.collection_prefix import CollectionPrefix, CollectionPrefixes
from app.engine.engine import Engine
from app.engine.events import Event, Failed, Finished
from app.engine.request import GenerationRequest, RequestError
from app.engine.sampler import SamplingParams
from mm.token_sequence import TokenSequence

log = logging.getLogger(__name__)

SaltOf = Callable[[str], str]  # tenant id -> the salt of its cache keys
LoadCollection = Callable[[str], CollectionRecord | None]  # by id, any tenant's
FullCollections = Callable[[], list[CollectionRecord]]  # those a restart prefills
POLL_S = 1.0  # how often a wait looks whether the server is stopping


@dataclass(slots=True, frozen=True)
class FullPrefixStatus:
    """A collection's whole prefix, as its JSON's `full_prefix` reports it."""

    state: str  # empty | queued | computing | cached | too_long | failed
    tokens: int  # head + every ready chunk, in this server's model
    cached_tokens: int  # of those, the most a cache tier holds now
    n_ctx: int  # the context one request may use


class CollectionPrefill:
    def __init__(
        self,
        engine: Engine,
        prefixes: CollectionPrefixes,
        salt_of: SaltOf,
        load: LoadCollection,
        full_collections: FullCollections = list,
        enabled: bool = True,
        coming: Callable[[str], bool] = lambda collection_id: False,
    ) -> None:
        """`coming`: whether a document of the collection is ready and about to be reported
        (the ingestion worker holds it back while others are embedded)."""
        self.engine, self.prefixes, self.salt_of = engine, prefixes, salt_of
        self.load, self.full_collections, self.enabled = load, full_collections, enabled
        self.coming = coming
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, None] = OrderedDict()  # collection ids, in order
        self._busy: str | None = None
        self._failed: set[str] = set()
        self._held: dict[str, frozenset[str]] = {}  # collection -> documents of its prefix
        self._stopping = False

    def start(self) -> None:
        """The worker thread; it first queues every full-mode collection (after a restart, those
        a tier holds are found cached and cost nothing)."""
        if self.enabled:
            threading.Thread(target=self._run, name="collection-prefill", daemon=True).start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def changed(self, collection_id: str) -> None:
        """The collection's prefix may have changed (any thread): queue it (again)."""
        if not self.enabled:
            return
        with self._cond:
            self._queue.pop(collection_id, None)
            self._queue[collection_id] = None
            self._failed.discard(collection_id)
            self._cond.notify_all()

    def pending(self) -> int:
        """Collections whose prefix waits to be handed to the engine."""
        with self._cond:
            return len(self._queue)

    def forget_documents(self, document_ids: set[str]) -> None:
        """Documents deleted (here or on another replica): the collections whose prefix held
        them are computed again without them."""
        with self._cond:
            hit = [c for c, held in self._held.items() if held & document_ids]
        for collection_id in hit:
            self.changed(collection_id)

    def status(self, collection: CollectionRecord) -> FullPrefixStatus:
        """Its prefix's state now (database and engine reads: call in a worker thread)."""
        return self.statuses([collection])[0]

    def statuses(self, collections: list[CollectionRecord]) -> list[FullPrefixStatus]:
        """Each one's prefix state now, the tiers asked once for all of them (one engine call
        between two steps, however many collections)."""
        prefixes = [self.prefixes.prefix(c) for c in collections]
        salts = [self.salt_of(c.tenant_id) for c in collections]
        engine = self.engine

        def lengths() -> list[int]:  # engine thread
            return [
                engine.cached_length(salt, p.tokens) if p.tokens and not p.empty else 0
                for salt, p in zip(salts, prefixes, strict=True)
            ]

        # Reads the tiers' indexes only: a sleeping model is not woken for it.
        cached = engine.call(lengths, needs_model=False).result()
        return [self._state(c, p, n) for c, p, n in zip(collections, prefixes, cached, strict=True)]

    def _state(
        self, collection: CollectionRecord, prefix: CollectionPrefix, cached: int
    ) -> FullPrefixStatus:
        n_ctx = self.prefixes.n_ctx
        if prefix.empty:
            return FullPrefixStatus("empty", 0, 0, n_ctx)
        with self._cond:
            busy, queued = self._busy == collection.id, collection.id in self._queue
            failed = collection.id in self._failed
        if self.enabled and collection.mode == "full" and self.coming(collection.id):
            queued = True
        if self.prefixes.fit(prefix).over > 0:
            state = "too_long"
        elif cached >= prefix.n_tokens - 1:  # (a step's last token may be left to compute)
            state = "cached"
        else:
            state = "computing" if busy else "queued" if queued else "failed" if failed else "empty"
        return FullPrefixStatus(state, prefix.n_tokens, min(cached, prefix.n_tokens), n_ctx)

    def _cached_length(self, collection: CollectionRecord, tokens: list[int]) -> int:
        salt, engine = self.salt_of(collection.tenant_id), self.engine
        future = engine.call(lambda: engine.cached_length(salt, tokens), needs_model=False)
        return future.result()

    def _run(self) -> None:
        try:
            for collection in self.full_collections():
                self.changed(collection.id)
        except Exception:  # the server runs on; these prefixes are computed when asked
            log.exception("could not queue the prefixes of the full-mode collections")
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                collection_id, _ = self._queue.popitem(last=False)
                self._busy = collection_id
            try:
                self._prefill(collection_id)
            except Exception:
                log.exception("prefill of collection %s failed", collection_id)
                with self._cond:
                    self._failed.add(collection_id)
            finally:
                with self._cond:
                    self._busy = None

    def _prefill(self, collection_id: str) -> None:
        collection = self.load(collection_id)
        if collection is None or collection.mode != "full":
            with self._cond:
                self._held.pop(collection_id, None)
            if collection is None:  # deleted: its prefix is never asked for again
                self.prefixes.forget(collection_id)
            return
        prefix = self.prefixes.prefix(collection)
        if prefix.empty or not prefix.tokens or self.prefixes.fit(prefix).over > 0:
            return
        with self._cond:
            self._held[collection_id] = prefix.documents
        if self._cached_length(collection, prefix.tokens) >= prefix.n_tokens - 1:
            return
        if not self._compute(collection, prefix):
            with self._cond:
                self._failed.add(collection_id)

    def _compute(self, collection: CollectionRecord, prefix: CollectionPrefix) -> bool:
        """The prefix computed by one background task; whether it ended well."""
        request = GenerationRequest(
            TokenSequence(prefix.tokens),
            SamplingParams(temperature=0.0, seed=0),
            max_tokens=1,  # the KV of the prompt is the point; the token is thrown away
            cache_salt=self.salt_of(collection.tenant_id),
            documents=prefix.documents,
            background=True,
        )
        ended = threading.Event()
        outcome: list[bool] = []

        def sink(event: Event) -> None:  # engine thread
            if isinstance(event, Finished | Failed):
                outcome.append(isinstance(event, Finished) and event.finish_reason != "cancelled")
                if isinstance(event, Failed):
                    log.warning("prefill of collection %s: %s", collection.id, event.message)
                ended.set()

        try:
            self.engine.submit(request, sink)
        except RequestError as e:  # shutting down, or the engine refuses it
            log.info("prefill of collection %s not queued: %s", collection.id, e.message)
            return False
        while not ended.wait(POLL_S):
            with self._cond:
                if self._stopping:
                    return False
        return bool(outcome and outcome[0])
