"""Uploads in flight: counted while an upload is taken in (parsed and stored), so the ingestion
worker leaves a core to it; back to none however the upload ends."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from app.docs.intake.doc_intake import Upload, take_in
from app.docs.intake.uploads_in_flight import UploadsInFlight
from app.engine.request import RequestError
from app.thread_pools import WorkerPool
from rag.parse_limits import ParseLimits


def test_counts_nested_uploads_and_ends_at_none() -> None:
    uploads = UploadsInFlight()
    assert not uploads
    with uploads, uploads:
        assert uploads and uploads.count == 2
    assert not uploads and uploads.count == 0


def _docs(seen: list[bool], fail: bool = False) -> SimpleNamespace:
    uploads = UploadsInFlight()

    def add_document(*_args: object, **_kw: object) -> tuple[SimpleNamespace, bool]:
        seen.append(bool(uploads))  # the worker thread's view while the upload is stored
        if fail:
            raise RuntimeError("the database went away")
        return SimpleNamespace(id="d1"), False

    return SimpleNamespace(
        uploads=uploads,
        max_bytes=1 << 20,
        parse_limits=ParseLimits(),
        library=SimpleNamespace(check_backend=lambda _c: None),
        store=SimpleNamespace(add_document=add_document),
        ingestor=SimpleNamespace(submit=lambda _d: None),
        parse=WorkerPool("parse", 1, 0, "parsing documents"),  # the real pool, one thread
        own_model=None,  # a server of one model: every collection is its own
    )


def test_an_upload_is_in_flight_while_taken_in_and_not_after() -> None:
    seen: list[bool] = []
    docs = _docs(seen)
    record, duplicate = asyncio.run(take_in(docs, "", "c1", Upload("a.txt", b"hello", None)))  # type: ignore[arg-type]
    assert record.id == "d1" and not duplicate
    assert seen == [True] and not docs.uploads


@pytest.mark.parametrize("fail", ["refused", "store"])
def test_an_upload_that_fails_is_no_longer_in_flight(fail: str) -> None:
    seen: list[bool] = []
    docs = _docs(seen, fail=fail == "store")
    data = b"" if fail == "refused" else b"hello"  # an empty file is refused before storing
    with pytest.raises(RequestError if fail == "refused" else RuntimeError):
        asyncio.run(take_in(docs, "", "c1", Upload("a.txt", data, None)))  # type: ignore[arg-type]
    assert not docs.uploads
