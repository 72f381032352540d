"""A ready document is prefilled into the prefix cache (through a real server and model)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.lib.server_process import ServerProcess
from tests.app.api.kvchat.test_document_routes import (
    BREAD,
    CATS,
    ROCKETS,
    TEA,
    VOLCANO,
    ask,
    call,
    new_collection,
    tail_tokens,
    upload_text,
)
from tests.app.api.llama_server.test_metrics_route import Samples, sample, scrape
from tests.eventually import eventually


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    with ServerProcess("-np", "2", "-c", "4096", "--data-dir", str(data)) as srv:
        yield srv


def wait_prefilled(server: ServerProcess, doc_id: str) -> dict:
    def ended() -> dict | None:  # the engine prefills while no request runs
        doc = call(server, "GET", f"/v1/documents/{doc_id}").json()
        if doc["prefill"] in ("done", "failed"):
            return doc
        if doc["prefill"] != "queued":
            pytest.fail(f"prefill state {doc['prefill']!r} before it ended: {doc}")
        return None

    return eventually(ended, f"the prefill of {doc_id} to end")


def prefill_state(server: ServerProcess, doc_id: str) -> str:
    def settled() -> str | None:
        state = call(server, "GET", f"/v1/documents/{doc_id}").json()["prefill"]
        return None if state in (None, "queued") else state

    return eventually(settled, f"the prefill state of {doc_id} to settle")


def test_the_first_question_about_a_prefilled_document_reuses_head_and_chunks(server):
    col = new_collection(server, "prefilled")
    named = [("b.txt", BREAD), ("t.txt", TEA)]
    docs = [upload_text(server, col, name, text) for name, text in named]
    for doc in docs:
        assert wait_prefilled(server, doc["id"])["prefill"] == "done"
    question = "How does sourdough rise?"
    answer = ask(server, col, question, top_k=1)
    assert answer["citations"][0]["document_id"] == docs[0]["id"]
    usage = answer["usage"]
    # Never asked before, yet everything but the question came from the cache.
    assert usage["prompt_tokens_details"]["cached_tokens"] >= usage["prompt_tokens"] - tail_tokens(
        server, question
    )


def test_a_listed_document_shows_its_prefill_state(server):
    col = new_collection(server, "listed")
    doc = upload_text(server, col, "t.txt", TEA + " Listed.")
    wait_prefilled(server, doc["id"])
    listed = call(server, "GET", f"/v1/collections/{col}/documents").json()["data"]
    assert [d["prefill"] for d in listed] == ["done"]
    assert [d["kv"] for d in listed] == [None]  # the collection does not blend: no chunk KV


def test_a_blending_collections_chunks_get_their_own_kv_in_the_background(tmp_path):
    """In a collection that blends, each chunk's own KV is computed at ingest: the first
    question on a new combination computes only k tokens per placed chunk and the question; the
    disk tier keeps that KV across a restart, so nothing is computed again."""
    k = 8
    args = ("-np", "2", "-c", "4096", "--data-dir", str(tmp_path / "data"))
    args += ("--cache-dir", str(tmp_path / "kv"), "--blend-sink-tokens", str(k))
    args += ("--blend-force",)  # the packaged SmolLM2 does not pass blend's quality gate
    named = [("cats.txt", CATS), ("rockets.txt", ROCKETS), ("volcano.txt", VOLCANO)]

    def first_question(server: ServerProcess, col: str, question: str, ids: list[str]) -> dict:
        body = {"document_ids": ids, "top_k": len(ids), "max_tokens": 2, "temperature": 0}
        timings = ask(server, col, question, **body)["timings"]
        assert timings["kv_reuse"] == "blend" and timings["cache_sources"]["chunk"] > 0
        # Computed: k tokens of each placed chunk (at most two), then the question; without
        # the chunks' own KV, the chunk after the prefilled prefix would be computed whole.
        assert timings["prompt_n"] <= 2 * k + tail_tokens(server, question)
        return timings

    with ServerProcess(*args) as server:
        col = new_collection(server, "blended", kv_reuse="blend")  # the server's: prefix
        docs = [upload_text(server, col, name, text)["id"] for name, text in named]
        for doc_id in docs:
            assert wait_prefilled(server, doc_id)["prefill"] == "done"
        first_question(server, col, "Which rocket went near the volcano?", docs[1:])
    with ServerProcess(*args) as server:
        assert [prefill_state(server, doc_id) for doc_id in docs] == ["cached"] * 3
        first_question(server, col, "Do cats like volcanoes?", [docs[0], docs[2]])


def background(samples: Samples, state: str) -> dict[str, float]:
    kinds = (
        ("prefill", "chunk_kv", "compaction") if state == "completed" else ("prefill", "chunk_kv")
    )
    name = f"kvchat_background_tasks_{state}" + ("_total" if state == "completed" else "")
    return {kind: sample(samples, name, kind=kind) for kind in kinds}


def test_a_documents_chunk_kv_reports_its_progress_and_the_background_gauges_drain(tmp_path):
    # --blend-force: the packaged SmolLM2 does not pass blend's quality gate, and a collection
    # that blends on a refused model computes no chunk KV.
    args = ("-np", "2", "-c", "4096", "--data-dir", str(tmp_path), "--blend-force")
    with ServerProcess(*args) as server:
        before = background(scrape(server), "completed")
        col = new_collection(
            server, "progress", kv_reuse="blend", chunk_tokens=32, overlap_tokens=0
        )
        text = " ".join((CATS, ROCKETS, VOLCANO, BREAD, TEA))
        body = {"filename": "mixed.txt", "text": text}
        r = call(server, "POST", f"/v1/collections/{col}/documents", json=body)
        assert r.status_code == 202, r.text
        doc_id = r.json()["id"]
        seen: list[dict] = []

        def kv_ended() -> dict | None:
            doc = call(server, "GET", f"/v1/documents/{doc_id}").json()
            if doc["status"] not in ("queued", "processing", "ready"):
                pytest.fail(f"the document failed: {doc}")
            if doc["kv"] is not None:
                seen.append(doc["kv"])
                if doc["kv"]["state"] in ("done", "failed"):
                    return doc
            return None

        doc = eventually(kv_ended, "the chunk KV to be computed")
        n_chunks = len(call(server, "GET", f"/v1/documents/{doc_id}/chunks").json()["data"])
        assert n_chunks > 1
        assert doc["status"] == "ready" and doc["prefill"] == "done"
        assert seen[-1] == {"state": "done", "chunks_total": n_chunks, "chunks_done": n_chunks}
        assert {kv["chunks_total"] for kv in seen} == {n_chunks}
        done = [kv["chunks_done"] for kv in seen]
        assert done == sorted(done) and all(0 <= n <= n_chunks for n in done)
        assert {kv["state"] for kv in seen} <= {"pending", "running", "done"}
        listed = call(server, "GET", f"/v1/collections/{col}/documents").json()["data"]
        assert [d["kv"] for d in listed] == [seen[-1]]
        # Nothing is left queued or running, and every request that ran was counted: the
        # document's prefix and each of its chunks (none was cached before).
        samples = scrape(server)
        assert background(samples, "queued") == {"prefill": 0, "chunk_kv": 0}
        assert background(samples, "running") == {"prefill": 0, "chunk_kv": 0}
        after = background(samples, "completed")
        assert after["prefill"] - before["prefill"] == 1
        assert after["chunk_kv"] - before["chunk_kv"] == n_chunks
