"""`Documents`: everything the document routes need, built once at start-up.

Chunk token ids are stored per chat-model fingerprint; chunks ingested under another model get
theirs computed on first use (`token_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.cache.state_file import cached_fingerprint
from app.chat.prompter import Prompter
from app.config import Settings
from app.db.chunk_store import ChunkStore
from app.db.document_records import ChunkRecord
from app.db.document_store import DocumentStore
from app.db.store import Store
from app.docs.doc_prefill import DocPrefill
from app.docs.doc_prompt import DocPrompter, token_counter
from app.docs.ingestor import Ingestor, WaitForQuiet
from app.docs.library import DocLibrary
from app.engine.model import Model
from rag.layout import chunk_text


@dataclass(slots=True)
class Documents:
    store: DocumentStore  # collections and documents, as the routes see them
    chunk_store: ChunkStore  # the ingestion worker's and retrieval's side
    library: DocLibrary
    ingestor: Ingestor
    prompts: DocPrompter
    model_key: str  # the chat model's fingerprint: token ids are stored under it
    max_bytes: int
    prefill: DocPrefill | None = None  # set once the engine runs (app/server.py)

    @classmethod
    def build(
        cls,
        settings: Settings,
        store: Store,
        model: Model,
        prompter: Prompter,
        wait_for_quiet: WaitForQuiet = lambda: None,
    ) -> Documents:
        chunk_store = ChunkStore(store)
        library = DocLibrary(
            chunk_store, settings.index_dir(), settings.embedding_model, settings.embedding_threads
        )
        key = cached_fingerprint(model.path)
        ingestor = Ingestor(chunk_store, library, token_counter(model), key, wait_for_quiet)
        return cls(
            DocumentStore(store),
            chunk_store,
            library,
            ingestor,
            DocPrompter(prompter, model),
            key,
            settings.doc_max_bytes,
        )

    def start(self) -> None:
        # Index files are checked against the database at start-up, before any search; a
        # collection's vectors load without the embedding model.
        self.library.load_all()
        self.ingestor.start()

    def stop(self) -> None:
        self.ingestor.stop()

    def prefill_state(self, document_id: str) -> str | None:
        return self.prefill.state(document_id) if self.prefill is not None else None

    def token_ids(self, chunks: list[ChunkRecord]) -> None:
        """Fill in token ids missing for this model (computed once, then stored)."""
        missing = {}
        tokenize = self.ingestor.tokenize
        for c in chunks:
            if c.token_ids is None:
                c.token_ids = tokenize(chunk_text(c.number, c.filename, c.page, c.text))
                missing[c.id] = c.token_ids
        if missing:
            self.chunk_store.set_tokens(self.model_key, missing)
