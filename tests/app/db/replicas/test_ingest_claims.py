"""IngestClaims on SQLite and PostgreSQL: a document is claimed by one worker at a time, a lease
that ran out frees it, a worker's own claim comes back to it, and finishing needs the claim."""

from __future__ import annotations

import threading
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import update

from app.db.documents.chunk_store import ChunkStore
from app.db.documents.chunk_writes import NumbersTaken
from app.db.documents.document_models import Document
from app.db.documents.document_records import NewChunk
from app.db.documents.document_store import DocumentStore
from app.db.models import utcnow
from app.db.store import Store

LEASE = 60.0  # never runs out during a test: expiry is set explicitly (`expire`)


def add(docs: DocumentStore, collection_id: str, name: str) -> str:
    record, _ = docs.add_document(
        "",
        collection_id,
        filename=name,
        kind="text",
        sha256=name.encode().hex().ljust(64, "0")[:64],
        text=f"the text of {name}",
        page_starts=[],
        metadata={},
    )
    return record.id


def expire(store: Store, document_id: str) -> None:
    """The claim's worker died a while ago: its lease is in the past."""
    with store.transaction(write=True) as s:
        past = utcnow() - timedelta(seconds=1)
        s.execute(update(Document).where(Document.id == document_id).values(lease_until=past))


def chunks(n: int) -> list[NewChunk]:
    vec = np.ones(4, dtype=np.float32) / 2
    return [NewChunk(i, f"part {i}", i, i + 1, None, vec) for i in range(n)]


@pytest.fixture
def rig(store: Store) -> tuple[DocumentStore, ChunkStore, str]:
    docs = DocumentStore(store)
    return docs, ChunkStore(store), docs.create_collection("", "c", 64, 8, None).id


def test_workers_claim_the_oldest_free_documents_one_each(rig):
    docs, chunk_store, col = rig
    claims = chunk_store.claims
    first, second = add(docs, col, "a"), add(docs, col, "b")
    assert claims.claim_next("w1", LEASE) == first
    assert claims.claim_next("w2", LEASE) == second  # the first is w1's
    assert claims.claim_next("w3", LEASE) is None
    assert claims.holder(first) == ("w1", True)
    assert not claims.claim(first, "w2", LEASE)  # a running lease is nobody else's


def test_a_lease_that_ran_out_is_taken_over_and_the_old_worker_loses_it(rig, store: Store):
    docs, chunk_store, col = rig
    claims = chunk_store.claims
    doc = add(docs, col, "a")
    assert claims.claim_next("dead", LEASE) == doc
    assert claims.renew(doc, "dead", LEASE)  # alive: renewing keeps it
    expire(store, doc)
    assert claims.holder(doc) == ("dead", False)
    assert claims.claim_next("live", LEASE) == doc
    assert not claims.renew(doc, "dead", LEASE)  # the dead worker, back, finds it taken
    assert not chunk_store.set_progress(doc, "processing", 1, 3, worker="dead")
    assert not chunk_store.finish_document(doc, chunks(2), "m", [[1], [2]], 1, worker="dead")
    assert chunk_store.set_progress(doc, "processing", 1, 2, worker="live")
    assert chunk_store.finish_document(doc, chunks(2), "m", [[1], [2]], 1, worker="live")
    assert docs.get_document("", doc).status == "ready"
    assert claims.holder(doc) == (None, False)  # finished: no claim left
    assert not claims.renew(doc, "live", LEASE)
    assert claims.claim_next("live", LEASE) is None


def test_a_restarted_worker_takes_its_own_claims_back_at_once(rig):
    docs, chunk_store, col = rig
    doc = add(docs, col, "a")
    assert chunk_store.claims.claim_next("replica-a", LEASE) == doc
    # The process died and started again under the same worker id: no wait for the lease.
    assert chunk_store.claims.claim_next("replica-a", LEASE) == doc
    assert chunk_store.claims.claim_next("replica-b", LEASE) is None


def test_a_failure_ends_the_claim_and_the_document_is_not_claimed_again(rig):
    docs, chunk_store, col = rig
    doc = add(docs, col, "a")
    assert chunk_store.claims.claim_next("w", LEASE) == doc
    assert chunk_store.set_progress(doc, "error", 0, 0, "broken", worker="w")
    assert chunk_store.claims.holder(doc) == (None, False)
    assert chunk_store.claims.claim_next("w", LEASE) is None
    assert docs.get_document("", doc).error == "broken"


def test_chunk_numbers_taken_meanwhile_are_refused_with_the_next_free_one(rig):
    docs, chunk_store, col = rig
    a, b = add(docs, col, "a"), add(docs, col, "b")
    for worker in ("wa", "wb"):
        assert chunk_store.claims.claim_next(worker, LEASE) is not None
    assert chunk_store.next_number(col) == 1  # both workers are told 1 ...
    assert chunk_store.finish_document(a, chunks(3), "m", [[1]] * 3, 1, worker="wa")
    with pytest.raises(NumbersTaken) as taken:  # ... the later one must renumber
        chunk_store.finish_document(b, chunks(2), "m", [[1]] * 2, 1, worker="wb")
    assert taken.value.next == 4
    assert docs.get_document("", b).status == "queued"  # nothing of it was stored
    assert chunk_store.finish_document(b, chunks(2), "m", [[1]] * 2, 4, worker="wb")
    assert [c.number for c in docs.chunks("", b)] == [4, 5]


def test_concurrent_workers_claim_every_document_exactly_once(rig):
    docs, chunk_store, col = rig
    wanted = {add(docs, col, f"doc{i}") for i in range(12)}
    got: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def work(worker: str) -> None:
        try:
            claimed = []
            while (doc := chunk_store.claims.claim_next(worker, LEASE)) is not None:
                claimed.append(doc)
                chunk_store.set_progress(doc, "error", 0, 0, "done here", worker=worker)
            got[worker] = claimed
        except BaseException as e:  # noqa: BLE001 (reported by the assertion below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    every = [doc for claimed in got.values() for doc in claimed]
    assert sorted(every) == sorted(wanted)  # each once: no document claimed twice


def test_a_worker_of_one_model_claims_only_its_model_s_collections(store: Store):
    """Servers of several models on one database: a document is chunked in its collection's
    model's tokens, so only that model's workers take it; without a model, every document."""
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    claims = chunk_store.claims
    twins = add(docs, docs.create_collection("", "t", 64, 8, None, model="twin").id, "a")
    old = add(docs, docs.create_collection("", "old", 64, 8, None).id, "b")  # no model
    assert claims.claim_next("smollm2's", LEASE, model="smollm2") is None
    assert not claims.holder(twins)[1] and not claims.holder(old)[1]
    assert claims.claim_next("twin's", LEASE, model="twin") == twins
    assert claims.claim_next("twin's", LEASE, model="twin") == twins  # its own, again
    assert claims.claim_next("one model's", LEASE) == old  # a server of one model: all
    expire(store, twins)
    assert claims.claim_next("smollm2's", LEASE, model="smollm2") is None  # not even freed
    assert claims.claim_next("another twin", LEASE, model="twin") == twins
