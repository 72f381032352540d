"""`ingest_document` and the `Ingestor` worker at unit level: a real SQLite store, a word-per-token
tokenizer and a fake library (its embedder returns a vector per text, `added` records what the
index would get). One test tokenizes with the packaged chat model. Uploads, the embedding model
and search through the API are in tests/app/api/kvchat/test_document_routes.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_models import Document
from app.db.documents.document_records import CollectionRecord
from app.db.documents.document_store import DocumentStore
from app.db.models import utcnow
from app.db.store import Store
from app.docs.background.ingestor import EMBED_BATCH, Ingestor, ingest_document
from app.engine.background_pacer import BackgroundPacer
from rag.layout import chunk_text

MODEL = "test-model-key"


def words(text: str) -> list[int]:
    """One token per word (its character sum): chunk sizes are word counts."""
    return [sum(map(ord, w)) for w in text.split()]


class FakeEmbedder:
    """A vector per text (its length and word count); `on_embed` runs before each batch."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.on_embed: Callable[[list[str]], None] | None = None
        self.threads: list[int] = []  # set_threads before each batch

    def set_threads(self, threads: int) -> None:
        self.threads.append(threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.on_embed is not None:
            self.on_embed(texts)
        self.batches.append(len(texts))
        return np.array([[len(t), len(t.split()), 1.0] for t in texts], dtype=np.float32)


class FakeLibrary:
    backend = "fake"
    threads = 2

    def check_backend(self, collection_id: str) -> None:
        pass

    def __init__(self) -> None:
        self.embedder_ = FakeEmbedder()
        self.added_: list[tuple[str, list[int], np.ndarray]] = []

    def embedder(self) -> FakeEmbedder:
        return self.embedder_

    def added(self, collection_id: str, ids: list[int], vectors: np.ndarray) -> None:
        self.added_.append((collection_id, ids, vectors.copy()))


class Rig:
    """A store with one collection (chunks of at most 12 words), built in one place."""

    def __init__(self, path: Path, tokenize: Callable[[str], list[int]] = words) -> None:
        self.store = Store(f"sqlite:///{path}/docs.db")
        self.store.migrate()
        self.docs, self.chunks = DocumentStore(self.store), ChunkStore(self.store)
        self.collection = self.docs.create_collection("", "notes", 12, 0, None)
        self.library = FakeLibrary()
        self.tokenize = tokenize

    def add(self, text: str, name: str = "notes.txt") -> str:
        record, _ = self.docs.add_document(
            "",
            self.collection.id,
            filename=name,
            kind="text",
            sha256=hashlib.sha256(text.encode()).hexdigest(),
            text=text,
            page_starts=[],
            metadata={},
        )
        return record.id

    def ingest(
        self, document_id: str, progress: Callable[[int, int], None] | None = None
    ) -> CollectionRecord | None:
        return ingest_document(
            self.chunks, self.library, self.tokenize, MODEL, document_id, progress
        )

    def ingestor(self) -> Ingestor:
        return Ingestor(self.chunks, self.library, self.tokenize, MODEL)

    def status(self, document_id: str) -> tuple[str, str | None]:
        d = self.docs.get_document("", document_id)
        return d.status, d.error


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.store.close()


def paragraphs(n: int, tag: str = "") -> str:
    return "\n\n".join(
        f"Paragraph {tag}{i} says eight words about the {i}th thing." for i in range(n)
    )


# --- one document ------------------------------------------------------------------------------


def test_a_document_becomes_ready_with_numbered_chunks_their_header_tokens_and_vectors(rig: Rig):
    text = paragraphs(EMBED_BATCH + 4)
    doc = rig.add(text)
    seen: list[tuple[int, int]] = []
    collection = rig.ingest(doc, lambda done, total: seen.append((done, total)))
    assert collection is not None and collection.id == rig.collection.id
    chunks = rig.docs.chunks("", doc, MODEL)
    n = len(chunks)
    assert n == EMBED_BATCH + 4  # one paragraph a chunk: two paragraphs are over 12 words
    assert rig.status(doc) == ("ready", None)
    record = rig.docs.get_document("", doc)
    assert (record.chunks_done, record.chunks_total) == (n, n)
    # Embedded in batches, with progress after each.
    assert rig.library.embedder_.batches == [EMBED_BATCH, 4]
    assert seen == [(EMBED_BATCH, n), (n, n)]
    for i, c in enumerate(chunks):
        assert (c.ordinal, c.number) == (i, i + 1)
        assert c.text == text[c.char_start : c.char_end]
        assert c.token_ids == words(chunk_text(c.number, "notes.txt", None, c.text))
    assert record.n_tokens == sum(len(c.token_ids) for c in chunks)
    # The index gets every chunk's id with the vector stored for it.
    [(collection_id, ids, vectors)] = rig.library.added_
    assert collection_id == rig.collection.id and ids == [c.id for c in chunks]
    stored_ids, stored, _ = rig.chunks.vectors(rig.collection.id, 3)
    assert stored_ids == ids and np.array_equal(stored, vectors)
    assert np.array_equal(vectors[0], [len(chunks[0].text), len(chunks[0].text.split()), 1.0])


def test_a_second_document_numbers_its_chunks_after_the_first(rig: Rig):
    first, second = rig.add(paragraphs(3, "a")), rig.add(paragraphs(2, "b"), "more.txt")
    rig.ingest(first)
    rig.ingest(second)
    chunks = rig.docs.chunks("", second, MODEL)
    assert [c.number for c in chunks] == [4, 5]
    assert chunks[0].token_ids == words(chunk_text(4, "more.txt", None, chunks[0].text))


def test_a_document_without_text_fails_with_a_reason(rig: Rig):
    doc = rig.add("   \n\n  ")
    with pytest.raises(ValueError, match="no text to index"):
        rig.ingest(doc)
    assert rig.library.added_ == []


def test_a_document_deleted_before_or_during_ingestion_is_dropped_quietly(rig: Rig):
    gone = rig.add(paragraphs(2))
    rig.docs.delete_document("", gone)
    assert rig.ingest(gone) is None
    during = rig.add(paragraphs(3, "x"))
    rig.library.embedder_.on_embed = lambda texts: rig.docs.delete_document("", during)
    assert rig.ingest(during) is None
    assert rig.library.added_ == [] and rig.chunks.vectors(rig.collection.id, 3)[0] == []


# --- the worker --------------------------------------------------------------------------------


def test_the_worker_resumes_unfinished_documents_first_and_records_a_failure(rig: Rig):
    left = rig.add(paragraphs(2, "left"))  # a previous process was cut off processing it
    rig.chunks.set_progress(left, "processing", 0, 2)
    failing = {"Paragraph bad0 says eight words about the 0th thing."}
    embedder = rig.library.embedder_

    def fail_bad(texts: list[str]) -> None:
        if failing & set(texts):
            raise RuntimeError("the embedder broke")

    embedder.on_embed = fail_bad
    ready: list[tuple[str, str]] = []
    worker = rig.ingestor()
    worker.on_ready = lambda collection, doc: ready.append((collection.id, doc))
    worker.start()
    bad, good = rig.add(paragraphs(2, "bad")), rig.add(paragraphs(2, "good"))
    worker.submit(bad)
    worker.submit(good)
    worker.stop()  # returns once every queued document is done
    assert ready == [(rig.collection.id, left), (rig.collection.id, good)]
    assert rig.status(left) == ("ready", None) and rig.status(good) == ("ready", None)
    assert rig.status(bad) == ("error", "ingestion failed: the embedder broke")


def test_documents_queued_together_are_all_embedded_before_any_is_announced_ready(rig: Rig):
    events: list[str] = []
    rig.library.embedder_.on_embed = lambda texts: events.append("embed " + texts[0][10:14])
    first, second = rig.add(paragraphs(2, "one")), rig.add(paragraphs(2, "two"))
    worker = rig.ingestor()
    worker.on_ready = lambda collection, doc: events.append(f"ready {doc}")
    worker.start()  # both are waiting already: the prefill of the first waits for the second
    worker.stop()
    embeds = [e for e in events if e.startswith("embed")]
    assert {e[:9] for e in embeds} == {"embed one", "embed two"}
    assert events == [*embeds, f"ready {first}", f"ready {second}"]


# --- the real tokenizer ------------------------------------------------------------------------


def test_stored_token_ids_spell_the_chunk_with_its_header_in_the_chat_model(
    tmp_path: Path, model_path: str
):
    from app.docs.questions.doc_prompt import token_counter
    from app.engine.engine_config import EngineConfig
    from app.engine.llama.model import Model

    model = Model(EngineConfig(model_path=model_path, n_ctx=256, n_parallel=1))
    rig = Rig(tmp_path, token_counter(model))
    try:
        doc = rig.add(paragraphs(2))
        rig.ingest(doc)
        for c in rig.docs.chunks("", doc, MODEL):
            assert model.detokenize(c.token_ids) == chunk_text(c.number, "notes.txt", None, c.text)
    finally:
        rig.store.close()
        model.close()


def test_the_servers_worker_paces_embedding_and_waits_for_quiet_before_each_batch(rig: Rig):
    doc = rig.add(paragraphs(20))
    batches = rig.library.embedder_.batches
    waits: list[int] = []  # how many batches were embedded at each wait
    pacer = BackgroundPacer(0.05, capacity=32, minimum=1)
    ingest_document(
        rig.chunks,
        rig.library,
        rig.tokenize,
        MODEL,
        doc,
        wait_for_quiet=lambda: waits.append(len(batches)),
        pacer=pacer,
    )
    # One chunk first (no rate measured yet), then as many as the measured rate allows.
    assert batches[0] == 1 and sum(batches) == 20 and len(batches) < 20
    assert waits == list(range(len(batches)))
    assert rig.status(doc) == ("ready", None)


def test_each_batch_takes_every_thread_while_the_engine_is_idle_and_one_while_it_computes(
    rig: Rig,
):
    doc = rig.add(paragraphs(3 * EMBED_BATCH))
    busy = iter([False, True, False])  # asked once before each batch
    ingest_document(
        rig.chunks, rig.library, rig.tokenize, MODEL, doc, engine_busy=lambda: next(busy)
    )
    assert rig.library.embedder_.threads == [FakeLibrary.threads, 1, FakeLibrary.threads]
    assert rig.library.embedder_.batches == [EMBED_BATCH] * 3


# --- several workers on one database (replicas) -------------------------------------------------


def test_two_workers_ingest_each_document_once_with_numbers_unique_in_the_collection(rig: Rig):
    ready: list[str] = []
    workers = [
        Ingestor(rig.chunks, rig.library, rig.tokenize, MODEL, worker=name, lease_s=60.0)
        for name in ("replica-a", "replica-b")
    ]
    for worker in workers:
        worker.on_ready = lambda collection, doc: ready.append(doc)
        worker.start()
    docs = [rig.add(paragraphs(3, f"d{i}-"), f"d{i}.txt") for i in range(6)]
    workers[0].submit(docs[-1])  # one upload wakes one replica; the other finds work by itself
    for worker in workers:
        worker.stop()  # returns once nothing is left to claim
    assert sorted(ready) == sorted(docs)  # each document once, whichever worker took it
    numbers = []
    for doc in docs:
        assert rig.status(doc) == ("ready", None)
        for c in rig.docs.chunks("", doc, MODEL):
            numbers.append(c.number)
            header = chunk_text(c.number, doc_name(rig, doc), None, c.text)
            assert c.token_ids == words(header)
    assert sorted(numbers) == list(range(1, len(numbers) + 1))


def doc_name(rig: Rig, document_id: str) -> str:
    return rig.docs.get_document("", document_id).filename


def test_a_document_whose_worker_died_is_taken_over_once_its_lease_ran_out(rig: Rig):
    doc = rig.add(paragraphs(2))
    assert rig.chunks.claims.claim_next("dead-replica", 60.0) == doc
    rig.chunks.set_progress(doc, "processing", 1, 2, worker="dead-replica")
    live = Ingestor(rig.chunks, rig.library, rig.tokenize, MODEL, worker="live", lease_s=60.0)
    live.start()
    live.stop()
    assert rig.status(doc) == ("processing", None)  # the lease still runs: not taken
    with rig.store.transaction(write=True) as s:  # time passes: the lease runs out
        s.execute(
            update(Document)
            .where(Document.id == doc)
            .values(lease_until=utcnow() - timedelta(seconds=1))
        )
    live = Ingestor(rig.chunks, rig.library, rig.tokenize, MODEL, worker="live", lease_s=60.0)
    live.start()
    live.stop()
    assert rig.status(doc) == ("ready", None)
    assert rig.chunks.claims.holder(doc) == (None, False)
