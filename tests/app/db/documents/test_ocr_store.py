"""OcrStore on SQLite and PostgreSQL: an upload's bytes kept while its pages wait for OCR, the
claim holder's progress and result, the bytes dropped with the result."""

from __future__ import annotations

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_records import OcrState
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from rag.ocr.ocr_reader import PageFailure

SOURCE = b"%PDF-1.4 the upload's bytes"


def scanned(store: Store) -> tuple[DocumentStore, ChunkStore, str]:
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 8, None)
    doc, _ = docs.add_document(
        "", col.id, filename="s.pdf", kind="pdf", sha256="a" * 64, text="Page one.\n\n",
        page_starts=[0, 11, 11], metadata={}, ocr_pages=[2, 3], source=SOURCE,
    )  # fmt: skip
    return docs, chunk_store, doc.id


def test_a_document_with_pages_to_read_keeps_its_bytes_until_they_are_read(store: Store):
    docs, chunk_store, doc_id = scanned(store)
    record = docs.get_document("", doc_id)
    assert record.ocr == OcrState([2, 3], [], [], 0) and record.ocr.total == 2
    assert chunk_store.ocr.source(doc_id) == SOURCE
    assert chunk_store.claims.claim(doc_id, "w1", 30.0)
    assert not chunk_store.ocr.progress(doc_id, 1, worker="w2")  # not the claim's holder
    assert chunk_store.ocr.progress(doc_id, 1, worker="w1")
    assert docs.get_document("", doc_id).ocr.done == 1
    assert docs.get_document("", doc_id).status == "processing"

    done = OcrState([], [2], [PageFailure(3, "OCR took longer than 60 s")], 2)
    text = "Page one.\n\nPage two."
    assert not chunk_store.ocr.finish(doc_id, text, [0, 11, 21], done, worker="w2")
    assert chunk_store.ocr.finish(doc_id, text, [0, 11, 21], done, worker="w1")
    record = docs.get_document("", doc_id)
    assert record.ocr == done and record.ocr.total == 2
    assert chunk_store.ocr.source(doc_id) is None  # dropped with the result
    _, stored_text, starts, _ = chunk_store.ingest_input(doc_id)
    assert (stored_text, starts) == (text, [0, 11, 21])


def test_a_document_without_pages_to_read_keeps_no_bytes(store: Store):
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    col = docs.create_collection("", "c", 64, 8, None)
    doc, _ = docs.add_document(
        "", col.id, filename="a.txt", kind="text", sha256="b" * 64, text="words",
        page_starts=[], metadata={}, ocr_pages=[], source=b"words",
    )  # fmt: skip
    assert doc.ocr is None and chunk_store.ocr.source(doc.id) is None


def test_progress_of_a_deleted_document_says_so(store: Store):
    docs, chunk_store, doc_id = scanned(store)
    docs.delete_document("", doc_id)
    assert not chunk_store.ocr.progress(doc_id, 1)
    assert chunk_store.ocr.source(doc_id) is None
