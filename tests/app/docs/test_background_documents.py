"""Documents' background work yields to clients and survives a restart (real server)."""

from __future__ import annotations

import httpx
import pytest

from tests.app.api.kvchat.test_document_routes import (
    BREAD,
    TEA,
    ask,
    call,
    new_collection,
    tail_tokens,
    upload_text,
)
from tests.app.api.llama_server.test_metrics_route import sample, scrape
from tests.app.docs.background.test_doc_prefill import prefill_state, wait_prefilled
from tests.eventually import eventually
from tests.server import ServerProcess

LONG_REPLY = {
    "messages": [{"role": "user", "content": "Tell a long story."}],
    "max_tokens": 1500,
    "ignore_eos": True,
    "temperature": 0,
    "stream": True,
}


def yielding(server: ServerProcess) -> float:
    return sample(scrape(server), "kvchat_background_yielding")


def test_a_document_is_not_embedded_while_a_client_request_runs():
    with ServerProcess("-np", "2", "-c", "4096", "--doc-prefill-tokens", "0") as server:
        col = new_collection(server, "yields")
        upload_text(server, col, "bread.txt", BREAD)  # the embedder is loaded from here on
        url = server.base_url + "/v1/chat/completions"
        with httpx.stream("POST", url, json=LONG_REPLY, timeout=180) as stream:
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))  # generating
            body = {"filename": "t.txt", "text": TEA}
            r = call(server, "POST", f"/v1/collections/{col}/documents", json=body)
            assert r.status_code == 202, r.text
            doc_id = r.json()["id"]
            # The worker stops before embedding and says so while the request generates...
            eventually(lambda: yielding(server) == 1, "the ingestion worker to yield")
            status = call(server, "GET", f"/v1/documents/{doc_id}").json()["status"]
            assert status == "processing"
            assert any(s["state"] != "idle" for s in call(server, "GET", "/slots").json())

        # ...and goes on once the request ended (closing the stream cancelled it).
        def ready() -> bool:
            doc = call(server, "GET", f"/v1/documents/{doc_id}").json()
            if doc["status"] not in ("processing", "ready"):
                pytest.fail(f"the document did not go on: {doc}")
            return doc["status"] == "ready"

        eventually(ready, "the document to be ready")
        assert yielding(server) == 0


def test_a_restart_prefills_only_the_documents_no_cache_tier_holds(tmp_path):
    data, kv = str(tmp_path / "data"), str(tmp_path / "kv")
    args = ("-np", "2", "-c", "4096", "--data-dir", data)
    with ServerProcess(*args, "--cache-dir", kv) as server:
        col = new_collection(server, "restart")
        doc = upload_text(server, col, "bread.txt", BREAD)
        assert wait_prefilled(server, doc["id"])["prefill"] == "done"
    # The disk tier kept the document's prefix: nothing is computed again, and the first
    # question takes it from there.
    with ServerProcess(*args, "--cache-dir", kv) as server:
        assert prefill_state(server, doc["id"]) == "cached"
        question = "How does sourdough rise?"
        usage = ask(server, col, question, top_k=1)["usage"]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        assert cached >= usage["prompt_tokens"] - tail_tokens(server, question)
    # Without the disk tier nothing of it is left: it is prefilled again.
    with ServerProcess(*args) as server:
        assert prefill_state(server, doc["id"]) == "done"
