"""`Documents`: everything the document routes need, built once at start-up.

Chunk token ids are stored per chat-model fingerprint; chunks ingested under another model get
theirs computed on first use (`token_ids`): a question to a collection on a server of another
model (named by the request) tokenizes its chunks for that model. With --docs-own-model
(`own_model`: servers of several models on one database) only this model's collections are
ingested and prefilled here, and a collection that has no model yet becomes this model's when a
document is uploaded to it here (so that some server ingests it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.chat.templates.prompter import Prompter
from app.config import Settings
from app.db.documents.chunk_store import ChunkStore
from app.db.documents.collection_chunks import CollectionChunks
from app.db.documents.document_records import ChunkRecord, CollectionRecord
from app.db.documents.document_store import DocumentStore
from app.db.replicas.deletion_log import DeletionLog
from app.db.store import Store
from app.docs.background.collection_prefill import CollectionPrefill
from app.docs.background.deletion_watch import DeletionWatch
from app.docs.background.doc_prefill import DocPrefill, KvProgress, SaltOf
from app.docs.background.ingest_lease import worker_id
from app.docs.background.ingestor import Ingestor
from app.docs.intake.uploads_in_flight import UploadsInFlight
from app.docs.library import DocLibrary
from app.docs.ocr_setup import ocr_setup
from app.docs.questions.blend_request import collection_blends
from app.docs.questions.collection_prefix import CollectionPrefixes
from app.docs.questions.doc_prompt import DocPrompter, token_counter
from app.engine.engine import Engine
from app.thread_pools import WorkerPool
from rag.layout import chunk_text
from rag.parse_limits import ParseLimits


@dataclass(slots=True)
class Documents:
    store: DocumentStore  # collections and documents, as the routes see them
    chunk_store: ChunkStore  # the ingestion worker's and retrieval's side
    library: DocLibrary
    ingestor: Ingestor
    prompts: DocPrompter
    model_key: str  # the chat model's fingerprint: token ids are stored under it
    max_bytes: int
    parse: WorkerPool  # uploads are parsed in its threads (app/thread_pools.py)
    prefill: DocPrefill | None = None  # ready documents into the prefix cache
    deletions: DeletionWatch | None = None  # documents deleted on any replica leave our caches
    uploads: UploadsInFlight = field(default_factory=UploadsInFlight)  # being taken in now
    # What reading an upload's text may cost: PDF pages, DOCX unpacked bytes, time, OCR's pages
    # and an image's pixels.
    parse_limits: ParseLimits = field(default_factory=ParseLimits)
    # --docs-own-model: this model's name (only its collections are ingested and prefilled
    # here); None: every collection's.
    own_model: str | None = None
    # Full-document mode: collections' whole prefixes, and their computing in the background.
    prefixes: CollectionPrefixes | None = None
    full_prefill: CollectionPrefill | None = None

    @classmethod
    def build(
        cls,
        settings: Settings,
        store: Store,
        engine: Engine,
        prompter: Prompter,
        salt_of: SaltOf,
        parse: WorkerPool,
    ) -> Documents:
        """`salt_of`: a tenant's cache salt (a document's prefill is cached under it); `parse`:
        the threads uploads are parsed in."""
        docs, chunk_store = DocumentStore(store), ChunkStore(store)
        library = DocLibrary(
            chunk_store,
            settings.index_dir(),
            settings.embedding_model,
            settings.embedding_threads,
            settings.embedding_backend,
            settings.doc_ann_min,
        )
        key = engine.model_fingerprint
        own_model = settings.model_name() if settings.docs_own_model else None
        prompts = DocPrompter(prompter, engine.tokenizer)
        prefill = DocPrefill(
            engine,
            docs,
            prompts,
            key,
            salt_of,
            settings.doc_prefill_tokens,
            # A full-mode collection's documents are prefilled as its whole prefix instead.
            lambda: [(c, d) for c, d in chunk_store.ready(own_model) if c.mode != "full"],
            blends=lambda collection: collection_blends(collection, settings.kv_reuse),
        )
        tokenize = token_counter(engine.tokenizer)
        reader = CollectionChunks(store)
        prefixes = CollectionPrefixes(
            reader,
            prompts,
            lambda chunks: fill_token_ids(chunks, tokenize, chunk_store, key),
            key,
            engine.n_ctx_request,
            settings.doc_full_reserve,
        )
        full_prefill = CollectionPrefill(
            engine,
            prefixes,
            salt_of,
            reader.collection,
            lambda: reader.full_collections(own_model),
            enabled=settings.doc_full_prefill,
            coming=lambda collection_id: ingestor.holds_collection(collection_id),
        )

        def ready(collection: CollectionRecord, document_id: str) -> None:
            full_prefill.changed(collection.id)  # (it reads the collection's mode again)
            if collection.mode != "full":
                prefill.document_ready(collection, document_id)

        uploads = UploadsInFlight()
        ocr = ocr_setup(settings)  # scans and images: read by the worker, or refused
        ingestor = Ingestor(
            chunk_store,
            library,
            tokenize,
            key,
            ready,
            engine.wait_for_quiet,
            worker=worker_id(settings.data_dir),
            lease_s=settings.ingest_lease,
            # One embedding thread while the engine computes or a client's upload is taken in.
            engine_busy=lambda: engine.computing or bool(uploads),
            own_model=own_model,
            ocr=ocr,
        )
        max_bytes = settings.doc_max_bytes

        async def forget(document_ids: set[str]) -> None:
            await engine.forget_documents(document_ids)
            for document_id in document_ids:
                prefill.forget(document_id)
            full_prefill.forget_documents(document_ids)

        log = DeletionLog(store)
        deletions = DeletionWatch(log, forget, settings.replica(), settings.deletion_log_window)
        parts = (docs, chunk_store, library, ingestor, prompts, key, max_bytes, parse)
        limits = ParseLimits(
            settings.doc_max_pages, settings.doc_max_unpacked_bytes, settings.doc_parse_timeout
        )
        limits = ocr.parse_limits(limits)
        return cls(*parts, prefill, deletions, uploads, limits, own_model, prefixes, full_prefill)

    def start(self) -> None:
        # Index files are checked against the database at start-up, before any search; a
        # collection's vectors load without the embedding model.
        self.library.load_all()
        self.ingestor.start()
        if self.prefill is not None:
            self.prefill.start()  # documents no cache tier holds after a restart
        if self.full_prefill is not None:
            self.full_prefill.start()  # full-mode collections' prefixes, likewise
        if self.deletions is not None:
            self.deletions.start()

    def stop(self) -> None:
        if self.deletions is not None:
            self.deletions.stop()
        if self.full_prefill is not None:
            self.full_prefill.stop()
        self.ingestor.stop()
        self.library.flush()  # index files written lazily while documents came in

    def prefill_state(self, document_id: str) -> str | None:
        if self.prefill is None:
            return None
        state = self.prefill.state(document_id)
        if state is None and self.prefill.enabled and self.ingestor.held(document_id):
            return "queued"  # ready; its prefill waits for the documents behind it
        return state

    def kv_progress(self, document_id: str) -> KvProgress | None:
        """Its chunks' own KV (blend) computed so far; None where none is computed here."""
        return self.prefill.kv(document_id) if self.prefill is not None else None

    def background_pending(self) -> dict[str, int]:
        """Documents' and full-mode collections' requests not yet handed to the engine, by
        kind."""
        pending = self.prefill.pending() if self.prefill is not None else {}
        if self.full_prefill is not None:
            pending["prefill"] = pending.get("prefill", 0) + self.full_prefill.pending()
        return pending

    def token_ids(self, chunks: list[ChunkRecord]) -> None:
        """Fill in token ids missing for this model (computed once, then stored)."""
        fill_token_ids(chunks, self.ingestor.tokenize, self.chunk_store, self.model_key)


def fill_token_ids(
    chunks: list[ChunkRecord],
    tokenize: Callable[[str], list[int]],
    chunk_store: ChunkStore,
    model_key: str,
) -> None:
    """Chunks ingested under another model get this model's token ids, stored for next time."""
    missing = {}
    for c in chunks:
        if c.token_ids is None:
            c.token_ids = tokenize(chunk_text(c.number, c.filename, c.page, c.text))
            missing[c.id] = c.token_ids
    if missing:
        chunk_store.set_tokens(model_key, missing)
