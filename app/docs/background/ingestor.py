"""`Ingestor`: the background worker that turns queued documents into searchable chunks.

One thread, documents one at a time in upload order: load the stored text (after reading the
pages the upload left to OCR, if any: app/docs/background/page_ocr.py), chunk it in chat-model
tokens, tokenize each chunk with its numbered header (once, for good), embed in batches
(progress after each), then store every chunk, vector and token id in one transaction and add
the vectors to the collection's index. A failure marks the document `error` with the reason.

Every replica has one worker, and a document is ingested by exactly one of them: a worker claims
it in the database with a lease it renews while it works (app/db/replicas/ingest_claims.py,
app/docs/background/ingest_lease.py). An upload wakes its own replica's worker; the workers also
look for work every POLL_S, which finds documents uploaded to a busy replica and documents whose
worker died (its lease ran out: nothing of them was stored yet, they start again from their text). A
restarted replica takes back its own documents at once. Where servers of several models share
the database, a worker claims only its own model's collections' documents (`own_model`).

Embedding is background work on cores the engine needs: before each batch the worker waits
until no client request is being received, queued or run (`wait_for_quiet`), and its batches are
paced to take at most `EMBED_BATCH_S` (`BackgroundPacer`, from the measured rate), so a request
that arrives meanwhile shares the cores with one short batch at most. Each batch takes the
embedder's full thread budget while nothing else computes (`engine_busy` false: no engine step,
such as a document's prefill, and no upload being taken in) and one thread otherwise.
Progress is written at most every PROGRESS_S: each write is a database transaction.

`on_ready` (the document's prefill into the prefix cache, app/docs/background/doc_prefill.py) is
held while more documents wait to be claimed or arrive within READY_GRACE_S, up to READY_HOLD_S: a
prefill computes on the engine's cores, and documents uploaded together become ready sooner when
they are embedded back to back first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.chunk_writes import NumbersTaken
from app.db.documents.document_records import CollectionRecord, NewChunk
from app.docs.background.ingest_lease import LeaseKeeper
from app.docs.background.page_ocr import no_text, read_scanned_pages
from app.docs.library import DocLibrary
from app.docs.ocr_setup import OcrSetup
from app.engine.background_pacer import BackgroundPacer
from rag.chunker import Chunker
from rag.layout import chunk_text
from rag.loader import LoadedDocument

log = logging.getLogger(__name__)

Tokenize = Callable[[str], list[int]]
WaitForQuiet = Callable[[], object]  # blocks while client requests are served
EngineBusy = Callable[[], bool]  # whether the engine computes anything now
EMBED_BATCH = 8  # chunks per batch where nothing else runs (the command-line ingest)
EMBED_BATCH_S = 0.05  # longest one embedding batch of the server's worker should take
POLL_S = 2.0  # an idle worker looks for documents no upload woke it for this often
RENUMBER_TRIES = 10  # other workers storing chunks of the same collection meanwhile
PROGRESS_S = 0.5  # a document's progress is written at most this often
READY_HOLD_S = 30.0  # longest a ready document's on_ready waits for the queue to drain
READY_GRACE_S = 1.0  # the queue counts as drained once no document came for this long


def embed_pacer() -> BackgroundPacer:
    """Sizes the server's embedding batches (in chunks) to about EMBED_BATCH_S each."""
    return BackgroundPacer(EMBED_BATCH_S, capacity=4 * EMBED_BATCH, minimum=1)


def ingest_document(
    store: ChunkStore,
    library: DocLibrary,
    tokenize: Tokenize,
    model: str,
    document_id: str,
    progress: Callable[[int, int], None] | None = None,
    wait_for_quiet: WaitForQuiet = lambda: None,
    pacer: BackgroundPacer | None = None,
    worker: str | None = None,
    engine_busy: EngineBusy = lambda: False,
    ocr: OcrSetup | None = None,
) -> CollectionRecord | None:
    """Ingest one stored document; its collection when it became ready, None if it was
    deleted meanwhile or (with `worker`, the holder of its claim) another worker took it over.
    Raises on failure. `pacer`: sizes the embedding batches (None: EMBED_BATCH chunks each);
    `engine_busy`: one embedding thread while it says so, the library's budget otherwise;
    `ocr`: how pages left to OCR are read (None: they are not, and are reported so)."""
    found = store.ingest_input(document_id)
    if found is None:
        return None  # deleted meanwhile
    doc, text, page_starts, collection = found
    loaded = LoadedDocument(text, doc.kind, page_starts)
    if doc.ocr is not None and doc.ocr.pending:
        if not store.set_progress(document_id, "processing", 0, 0, worker=worker):
            return None
        scanned = read_scanned_pages(
            store, ocr or OcrSetup(None), doc, loaded, wait_for_quiet, worker
        )
        if scanned is None:
            return None
        loaded, doc.ocr = scanned.loaded, scanned.state
    chunker = Chunker(
        lambda t: len(tokenize(t)), collection.chunk_tokens, collection.overlap_tokens
    )
    chunks = chunker.split(loaded)
    if not chunks:
        raise ValueError(no_text(doc.ocr))
    if not store.set_progress(document_id, "processing", 0, len(chunks), worker=worker):
        return None

    def headed(first: int) -> list[list[int]]:  # each chunk's tokens, its numbered header first
        return [
            tokenize(chunk_text(first + c.ordinal, doc.filename, c.page, c.text)) for c in chunks
        ]

    first = store.next_number(collection.id)
    token_ids = headed(first)
    library.check_backend(collection.id)  # before the work: another backend's collection
    embedder = library.embedder()
    vectors, done, written = [], 0, time.monotonic()
    while done < len(chunks):
        wait_for_quiet()
        embedder.set_threads(1 if engine_busy() else library.threads)
        size = pacer.tokens() if pacer is not None else EMBED_BATCH
        batch = chunks[done : done + size]
        t0 = time.perf_counter()
        vectors.append(embedder.embed([c.text for c in batch]))
        if pacer is not None:
            pacer.observe(len(batch), time.perf_counter() - t0)
        done += len(batch)
        if done < len(chunks) and time.monotonic() - written >= PROGRESS_S:
            written = time.monotonic()
            if not store.set_progress(document_id, "processing", done, len(chunks), worker=worker):
                return None
        if progress is not None:
            progress(done, len(chunks))
    matrix = np.concatenate(vectors)
    new = [
        NewChunk(c.ordinal, c.text, c.char_start, c.char_end, c.page, matrix[i])
        for i, c in enumerate(chunks)
    ]
    for _ in range(RENUMBER_TRIES):
        try:
            if not store.finish_document(
                document_id, new, model, token_ids, first, worker, library.backend
            ):
                return None
            break
        except NumbersTaken as taken:  # another replica stored chunks of this collection
            first = taken.next
            token_ids = headed(first)
    else:
        raise RuntimeError("the collection's chunk numbers kept being taken by other workers")
    ids = [chunk_id for chunk_id, _ in store.numbered(document_id)]
    library.added(collection.id, ids, matrix)
    return collection


class Ingestor:
    def __init__(
        self,
        store: ChunkStore,
        library: DocLibrary,
        tokenize: Tokenize,
        model: str,
        on_ready: Callable[[CollectionRecord, str], None] | None = None,
        wait_for_quiet: WaitForQuiet = lambda: None,
        worker: str = "ingest",
        lease_s: float = 30.0,
        engine_busy: EngineBusy = lambda: False,
        own_model: str | None = None,
        ocr: OcrSetup | None = None,
    ) -> None:
        """`worker`: this replica's id in claims (app/docs/background/ingest_lease.py `worker_id`);
        `lease_s`: how long a claim lasts unless renewed (--ingest-lease); `own_model`: claim
        only documents of collections of the model of this name (--docs-own-model), None: all;
        `ocr`: how pages of scans and images are read (None: not on this server)."""
        self.store, self.library, self.tokenize, self.model = store, library, tokenize, model
        self.ocr = ocr
        self.wait_for_quiet, self.engine_busy = wait_for_quiet, engine_busy
        self.worker, self.lease_s, self.own_model = worker, lease_s, own_model
        self.pacer = embed_pacer()  # keeps its measured rate from one document to the next
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        # Called (on the worker) with each document that became ready and its collection,
        # once no other document waits (or READY_HOLD_S after the first of them was ready).
        self.on_ready = on_ready
        self._ready: list[tuple[CollectionRecord, str]] = []  # held; changed under the lock
        self._ready_lock = threading.Lock()
        self._ready_since = 0.0

    def start(self) -> None:
        """Start the worker; documents a previous process left unfinished go first (the
        oldest unfinished document is claimed first)."""
        self._thread = threading.Thread(target=self._run, name="ingest", daemon=True)
        self._thread.start()

    def submit(self, document_id: str) -> None:
        """A document was stored: wake the worker (it claims documents from the database, so
        this or any other replica's worker may take it)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop once no document is left to claim (those being uploaded now included)."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                claims = self.store.claims
                document_id = claims.claim_next(self.worker, self.lease_s, self.own_model)
            except Exception:  # the database is away: try again later
                log.exception("could not claim a document to ingest")
                document_id = None
            if document_id is not None:
                self._ingest(document_id)
                if self._ready and time.monotonic() - self._ready_since >= READY_HOLD_S:
                    self._announce()
                continue
            if self._ready and not self._stopping and self._wake.wait(READY_GRACE_S):
                continue  # an upload came (documents sent one after another): ingest it first
            self._announce()
            if self._stopping:
                return
            self._wake.wait(POLL_S)

    def _announce(self) -> None:
        """on_ready for each held document; each stays `held` until its call returned."""
        for collection, document_id in list(self._ready):
            try:
                if self.on_ready is not None:
                    self.on_ready(collection, document_id)
            except Exception:
                log.exception("on_ready of %s failed", document_id)
            with self._ready_lock:
                self._ready.remove((collection, document_id))

    def held(self, document_id: str) -> bool:
        """Whether the document is ready and its on_ready is held back (any thread)."""
        with self._ready_lock:
            return any(d == document_id for _, d in self._ready)

    def holds_collection(self, collection_id: str) -> bool:
        """Whether a ready document of the collection has its on_ready held back."""
        with self._ready_lock:
            return any(c.id == collection_id for c, _ in self._ready)

    def _ingest(self, document_id: str) -> None:
        try:
            with LeaseKeeper(self.store.claims, document_id, self.worker, self.lease_s):
                collection = ingest_document(
                    self.store,
                    self.library,
                    self.tokenize,
                    self.model,
                    document_id,
                    wait_for_quiet=self.wait_for_quiet,
                    pacer=self.pacer,
                    worker=self.worker,
                    engine_busy=self.engine_busy,
                    ocr=self.ocr,
                )
            if collection is not None:
                with self._ready_lock:
                    if not self._ready:
                        self._ready_since = time.monotonic()
                    self._ready.append((collection, document_id))
        except Exception as e:
            log.exception("ingesting %s failed", document_id)
            try:
                reason = f"ingestion failed: {e}"
                self.store.set_progress(document_id, "error", 0, 0, reason, self.worker)
            except Exception:
                log.exception("could not record the failure of %s", document_id)
