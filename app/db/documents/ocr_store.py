"""`OcrStore`: a document's pages read by OCR, as the ingestion worker records them.

An upload with pages to read keeps its bytes (`source`) and the pages (`ocr.pending`) until the
worker that claimed it has read them; `finish` then writes the document's text with the read
pages in it, which pages were read and which failed (with why), and drops the bytes, in one
transaction. A worker that dies before that leaves the document as it was uploaded: the next
one reads its pages again. Every write is the claim holder's only (`worker`), as the rest of
ingestion's: a worker that lost its claim writes nothing.
"""

from __future__ import annotations

from sqlalchemy import select, update

from app.db.documents.document_models import Document
from app.db.documents.document_records import OcrState
from app.db.store import Store


class OcrStore:
    def __init__(self, store: Store) -> None:
        self._tx = store.transaction

    def source(self, document_id: str) -> bytes | None:
        """The upload's bytes while its pages wait for OCR; None once they are read."""
        with self._tx() as s:
            return s.scalar(select(Document.source).where(Document.id == document_id))

    def progress(self, document_id: str, done: int, worker: str | None = None) -> bool:
        """`done` pages read so far; False if the document is gone or the claim was lost."""
        values = {"status": "processing", "ocr_done": done}
        return self._update(document_id, worker, values)

    def finish(
        self,
        document_id: str,
        text: str,
        page_starts: list[int],
        state: OcrState,
        worker: str | None = None,
    ) -> bool:
        """The document's text with its read pages in it, and what OCR made of each page."""
        values = {
            "text": text,
            "page_starts": page_starts,
            "ocr": state.to_json(),
            "ocr_done": state.done,
            "source": None,
        }
        return self._update(document_id, worker, values)

    def _update(self, document_id: str, worker: str | None, values: dict[str, object]) -> bool:
        query = update(Document).where(Document.id == document_id)
        if worker is not None:
            query = query.where(Document.claimed_by == worker)
        with self._tx(write=True) as s:
            return s.execute(query.values(**values)).rowcount == 1
