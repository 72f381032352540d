"""A ready document is prefilled into the prefix cache (through a real server and model)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bench.server_process import ServerProcess
from tests.app.api.routes.test_documents import (
    BREAD,
    TEA,
    ask,
    call,
    new_collection,
    tail_tokens,
    upload_text,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    with ServerProcess("-np", "2", "-c", "4096", "--data-dir", str(data)) as srv:
        yield srv


def wait_prefilled(server: ServerProcess, doc_id: str) -> dict:
    deadline = time.monotonic() + 180  # the engine prefills while no request runs
    while time.monotonic() < deadline:
        doc = call(server, "GET", f"/v1/documents/{doc_id}").json()
        if doc["prefill"] in ("done", "failed"):
            return doc
        assert doc["prefill"] == "queued", doc
        time.sleep(0.1)
    raise TimeoutError(f"the prefill of {doc_id} did not end")


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
