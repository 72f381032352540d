"""`read_scanned_pages`: ingestion's first step for a document with pages to read by OCR.

The worker that claimed the document reads the pages the upload left empty (rag/ocr/
ocr_reader.py) from its stored bytes, one page at a time: before each page it waits until no
client request is being served (OCR is background work on the engine's cores; the tesseract
child also runs at a lower priority) and records its progress, which also tells it whether the
document is still there and still its own. The read pages' text goes into the document's text
in page order, so chunks, their page numbers and citations follow as for any PDF; which pages
were read, and which failed and why, are stored with it (GET /v1/documents/{id}).

On a server without OCR (--ocr off, or tesseract missing), pages another replica accepted for
OCR are reported failed with that reason: a document is never left waiting or silently short.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_records import DocumentRecord, OcrState
from app.docs.ocr_setup import OcrSetup
from rag.loader import LoadedDocument, paged
from rag.ocr.ocr_reader import OcrResult, PageFailure, read_pages


@dataclass(slots=True)
class ScannedPages:
    loaded: LoadedDocument  # the document's text, read pages in
    state: OcrState  # which pages were read, which failed


def read_scanned_pages(
    store: ChunkStore,
    setup: OcrSetup,
    doc: DocumentRecord,
    loaded: LoadedDocument,
    wait_for_quiet: Callable[[], object],
    worker: str | None,
) -> ScannedPages | None:
    """`loaded` (the stored text) with the pending pages read in; None if the document was
    deleted or the claim lost meanwhile."""
    state = doc.ocr
    if state is None or not state.pending:
        return ScannedPages(loaded, state or OcrState([], [], []))
    result = _read(store, setup, doc, state.pending, wait_for_quiet, worker)
    if result is None:
        return None
    pages = loaded.pages()
    for page, text in result.texts.items():
        pages[page - 1] = text
    read = paged(pages, doc.kind)
    done = OcrState(
        [],
        sorted({*state.pages, *result.texts}),
        sorted([*state.failed, *result.failed], key=lambda f: f.page),
        len(state.pending),
    )
    if not store.ocr.finish(doc.id, read.text, read.page_starts, done, worker):
        return None
    return ScannedPages(read, done)


def _read(
    store: ChunkStore,
    setup: OcrSetup,
    doc: DocumentRecord,
    pending: list[int],
    wait_for_quiet: Callable[[], object],
    worker: str | None,
) -> OcrResult | None:
    if setup.options is None:
        return OcrResult(failed=[PageFailure(p, f"not read: {setup.no_ocr}") for p in pending])
    source = store.ocr.source(doc.id)
    if source is None:  # read and dropped by another worker meanwhile: its text stands
        return None

    def before_page(done: int, total: int) -> bool:
        wait_for_quiet()
        return store.ocr.progress(doc.id, done, worker)

    return read_pages(source, doc.kind, pending, setup.options, before_page)


def no_text(state: OcrState | None) -> str:
    """Why a document has no text to index, where OCR had pages of it to read."""
    if state is None:
        return "the document has no text to index"
    failed = "; ".join(f"page {f.page}: {f.reason}" for f in state.failed[:5])
    more = f" (and {len(state.failed) - 5} more pages)" if len(state.failed) > 5 else ""
    read = f"OCR found no text on page(s) {_pages(state.pages)}" if state.pages else ""
    return "no text to index: " + "; ".join(p for p in (read, failed + more) if p)


def _pages(pages: list[int]) -> str:
    return ", ".join(str(p) for p in pages[:20]) + (" ..." if len(pages) > 20 else "")
