"""A full-mode collection's whole prefix computed in the background: what is queued, when it is
computed again, the states it reports (a stand-in engine, a real SQLite database), and a
restart through the real server (the disk tier keeps the prefix; without it, it is computed
again)."""

from __future__ import annotations

from concurrent.futures import Future

from app.db.documents.collection_chunks import CollectionChunks
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from app.docs.background.collection_prefill import CollectionPrefill
from app.docs.questions.collection_prefix import CollectionPrefixes
from app.engine.events import Finished, Timings
from app.engine.request import GenerationRequest
from bench.lib.server_process import ServerProcess
from tests.app.api.kvchat.test_document_routes import new_collection, upload_text
from tests.app.api.kvchat.test_full_mode import FACTS, ask, collection, wait_cached
from tests.app.api.llama_server.test_metrics_route import sample, scrape
from tests.app.docs.questions.test_collection_prefix import Prompts, ready
from tests.eventually import eventually


class Engine:
    """What CollectionPrefill asks of the engine: calls, submissions, the cached length."""

    def __init__(self) -> None:
        self.held: dict[str, list[int]] = {}  # salt -> the one prefix it caches
        self.documents: dict[str, frozenset[str]] = {}  # salt -> the documents that one holds
        self.submitted: list[GenerationRequest] = []

    def forget_documents(self, document_ids: set[str]) -> None:
        """As every tier does: KV holding a deleted document is dropped whole."""
        for salt in [s for s, held in self.documents.items() if held & document_ids]:
            del self.held[salt], self.documents[salt]

    def call(self, fn, needs_model: bool = True) -> Future:  # noqa: ANN001
        done: Future = Future()
        done.set_result(fn())
        return done

    def cached_length(self, salt: str, tokens: list[int]) -> int:
        held, n = self.held.get(salt, []), 0
        while n < min(len(held), len(tokens)) and held[n] == tokens[n]:
            n += 1
        return n

    def submit(self, request: GenerationRequest, sink) -> None:  # noqa: ANN001
        self.submitted.append(request)
        self.held[request.cache_salt] = list(request.prompt.tokens)
        self.documents[request.cache_salt] = request.documents
        sink(Finished("length", len(request.prompt), 1, 0, Timings()))


def prefill(store: Store, engine: Engine, n_ctx: int = 100) -> CollectionPrefill:
    reader = CollectionChunks(store)
    prefixes = CollectionPrefixes(reader, Prompts(), lambda c: None, "m", n_ctx, 10)  # type: ignore[arg-type]
    return CollectionPrefill(engine, prefixes, lambda t: f"salt-{t}", reader.collection)  # type: ignore[arg-type]


def test_a_full_collection_s_prefix_is_computed_once_and_again_when_it_changes(store):
    engine, docs = Engine(), DocumentStore(store)
    work = prefill(store, engine)
    col = docs.create_collection("", "c", 64, 8, None, mode="full")
    assert work.status(col).state == "empty"
    a = ready(store, col.id, "a", [[10, 11]])
    work.changed(col.id)
    work.changed(col.id)  # queued once
    assert work.pending() == 1 and work.status(col).state == "queued"
    work.start()
    eventually(lambda: work.status(col).state == "cached", "the prefix to be computed")
    assert len(engine.submitted) == 1
    request = engine.submitted[0]
    assert list(request.prompt.tokens) == [1, 2, 3, 10, 11] and request.background
    assert request.documents == {a} and request.cache_salt == "salt-" and request.max_tokens == 1
    status = work.status(col)
    assert (status.tokens, status.cached_tokens, status.n_ctx) == (5, 5, 100)
    # A document added at the end: the prefix computed again extends the one held.
    b = ready(store, col.id, "b", [[20, 21, 22]])
    assert work.status(col).cached_tokens == 5 and work.status(col).state != "cached"
    work.changed(col.id)
    eventually(lambda: len(engine.submitted) == 2, "the prefix to be computed again")
    assert list(engine.submitted[1].prompt.tokens) == [1, 2, 3, 10, 11, 20, 21, 22]
    # A document deleted (on any replica): the collections holding it are computed again.
    DocumentStore(store).delete_document("", b)
    engine.forget_documents({b})
    assert work.status(col).state == "empty"
    work.forget_documents({b, "doc-elsewhere"})
    eventually(lambda: len(engine.submitted) == 3, "the prefix without the document")
    assert engine.submitted[2].documents == {a}
    # Nothing is computed for a collection already cached, in retrieval mode, or too long.
    work.changed(col.id)
    plain = docs.create_collection("", "p", 64, 8, None)
    ready(store, plain.id, "p", [[30, 31, 32]])
    work.changed(plain.id)
    long = docs.create_collection("", "l", 64, 8, None, mode="full")
    ready(store, long.id, "l", [[40] * 95])
    work.changed(long.id)
    eventually(lambda: work.pending() == 0, "the queue to drain")
    assert work.status(long).state == "too_long" and work.status(long).tokens == 98
    assert work.status(plain).state == "empty"  # retrieval mode: not computed
    assert len(engine.submitted) == 3
    work.stop()


def test_nothing_is_queued_when_it_is_turned_off(store):
    engine = Engine()
    reader = CollectionChunks(store)
    prefixes = CollectionPrefixes(reader, Prompts(), lambda c: None, "m", 100, 10)  # type: ignore[arg-type]
    off = CollectionPrefill(engine, prefixes, str, reader.collection, enabled=False)  # type: ignore[arg-type]
    col = DocumentStore(store).create_collection("", "c", 64, 8, None, mode="full")
    ready(store, col.id, "a", [[10]])
    off.changed(col.id)
    assert off.pending() == 0 and off.status(col).state == "empty"


def test_after_a_restart_the_prefix_a_tier_kept_is_not_computed_again(tmp_path):
    data, kv = str(tmp_path / "data"), str(tmp_path / "kv")
    args = ("-np", "2", "-c", "2048", "--data-dir", data, "--doc-prefill-tokens", "0")
    with ServerProcess(*args, "--cache-dir", kv) as server:
        col = new_collection(server, "kept", mode="full")
        for filename, text in FACTS.items():
            upload_text(server, col, filename, text)
        tokens = wait_cached(server, col)["tokens"]
    with ServerProcess(*args, "--cache-dir", kv) as server:
        assert wait_cached(server, col)["tokens"] == tokens
        done = sample(scrape(server), "kvchat_background_tasks_completed_total", kind="prefill")
        assert done == 0  # found on disk, not computed
        answer = ask(server, col, "When was the harbour built?")
        assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] >= tokens
    with ServerProcess(*args) as server:  # no disk tier: computed again in the background
        assert wait_cached(server, col)["tokens"] == tokens
        assert collection(server, col)["mode"] == "full"
