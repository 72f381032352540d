"""Full-document mode through a real server: every ready document before the question, the
collection's prefix computed once (in the background) and reused by every question of the
tenant, refused with the numbers (or answered by retrieval) when it does not fit, and cited by
the chunks the answer quoted."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from tests.app.api.kvchat.test_document_routes import call, new_collection, upload_text
from tests.eventually import eventually

# Three short documents (one chunk each at the default chunk size) and a long one.
FACTS = {
    "harbour.txt": (
        "The harbour of Velmora was built in 1642 by the merchant guild. Its lighthouse has a "
        "green lamp, and ships pay a toll of four silver coins to enter."
    ),
    "orchard.txt": (
        "The orchard north of Velmora grows quinces and medlars. The harvest festival is held "
        "on the first Sunday of October, when the mayor rings the copper bell."
    ),
    "mill.txt": (
        "Mount Etna is an active volcano in Sicily. The old mill of Velmora grinds barley with "
        "a wheel turned by the river Ost, and it was rebuilt after the flood of 1781."
    ),
}
LONG = " ".join(
    f"Entry {i} of the ledger records a shipment of {i * 7} barrels." for i in range(90)
)
ETNA = "Mount Etna is an active volcano in Sicily."


def streamed_citations(r: httpx.Response) -> list[dict]:
    """A full-mode reply's stream read through: the mode comes first, the citations once, after
    the text; returns those citations."""
    assert r.status_code == 200
    events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    assert [c.get("mode") for c in chunks if "mode" in c] == ["full"]
    text_at = max(i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"])
    cites = [i for i, c in enumerate(chunks) if "citations" in c]
    assert len(cites) == 1 and cites[0] > text_at
    return chunks[cites[0]]["citations"]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    # 1024 tokens a request; no document prefill of retrieval collections (only the full
    # collections' prefixes are computed in the background here).
    args = ["-np", "2", "-c", "2048", "--data-dir", str(data), "--doc-prefill-tokens", "0"]
    with ServerProcess(*args) as srv:
        yield srv


def full_collection(server: ServerProcess, name: str, **fields: object) -> tuple[str, list[dict]]:
    col = new_collection(server, name, mode="full", **fields)
    docs = [upload_text(server, col, filename, text) for filename, text in FACTS.items()]
    return col, docs


def collection(server: ServerProcess, col: str) -> dict:
    r = call(server, "GET", f"/v1/collections/{col}")
    assert r.status_code == 200, r.text
    return r.json()


def wait_cached(server: ServerProcess, col: str) -> dict:
    def cached() -> dict | None:
        found = collection(server, col)["full_prefix"]
        assert found["state"] in ("empty", "queued", "computing", "cached"), found
        return found if found["state"] == "cached" else None

    return eventually(cached, f"the prefix of {col} to be computed")


def ask_raw(server: ServerProcess, col: str, question: str, **body) -> httpx.Response:
    fields = {"question": question, "max_tokens": 4, "temperature": 0, **body}
    return call(server, "POST", f"/v1/collections/{col}/ask", json=fields)


def ask(server: ServerProcess, col: str, question: str, **body) -> dict:
    r = ask_raw(server, col, question, **body)
    assert r.status_code == 200, r.text
    return r.json()


def cached_tokens(answer: dict) -> int:
    return answer["usage"]["prompt_tokens_details"]["cached_tokens"]


def all_chunk_ids(server: ServerProcess, docs: list[dict]) -> set[str]:
    ids = set()
    for doc in docs:
        chunks = call(server, "GET", f"/v1/documents/{doc['id']}/chunks").json()["data"]
        ids |= {c["id"] for c in chunks}
    return ids


def test_a_full_collection_is_computed_once_and_every_question_computes_only_itself(server):
    col, docs = full_collection(server, "full")
    made = collection(server, col)
    assert made["mode"] == "full" and made["full_prefix"]["n_ctx"] == 1024
    prefix = wait_cached(server, col)
    # The whole collection: every chunk's tokens and the head.
    chunk_tokens = sum(
        c["n_tokens"]
        for d in docs
        for c in call(server, "GET", f"/v1/documents/{d['id']}/chunks").json()["data"]
    )
    assert chunk_tokens < prefix["tokens"] < chunk_tokens + 100
    assert prefix["cached_tokens"] >= prefix["tokens"] - 1
    listed = call(server, "GET", "/v1/collections").json()["data"]
    assert [c["full_prefix"]["state"] for c in listed if c["id"] == col] == ["cached"]
    # The first question already finds the prefix computed in the background, and so does
    # every later one: each computes only its own tokens.
    for question in ("When was the harbour built?", "What does the mill grind?"):
        answer = ask(server, col, question)
        assert answer["mode"] == "full"
        assert answer["usage"]["prompt_tokens"] > prefix["tokens"]
        assert cached_tokens(answer) >= prefix["tokens"]
    # A request may still ask by retrieval: the best chunks, cited before the answer.
    retrieved = ask(server, col, "When was the harbour built?", mode="retrieval", top_k=1)
    assert retrieved["mode"] == "retrieval" and len(retrieved["citations"]) == 1
    assert retrieved["usage"]["prompt_tokens"] < prefix["tokens"]


def test_a_collection_too_long_for_full_mode_is_refused_with_the_numbers_or_falls_back(server):
    col = new_collection(server, "long", mode="full")
    upload_text(server, col, "ledger.txt", LONG)
    upload_text(server, col, "harbour.txt", FACTS["harbour.txt"])

    def sized() -> dict | None:
        found = collection(server, col)["full_prefix"]
        return found if found["state"] == "too_long" else None

    prefix = eventually(sized, "the collection to be sized")
    assert prefix["tokens"] > prefix["n_ctx"] == 1024
    assert prefix["cached_tokens"] < 100  # the head other collections' questions share
    r = ask_raw(server, col, "What does the ledger record?")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "collection_too_long" and error["param"] == "mode"
    assert f"documents are {prefix['tokens']} tokens" in error["message"]
    assert "over the context of 1024 tokens" in error["message"]
    over = int(error["message"].split(" tokens over")[0].rsplit(" ", 1)[-1])
    assert over > prefix["tokens"] - 1024
    # The same in a stream: refused before it starts.
    assert ask_raw(server, col, "What?", stream=True).status_code == 400
    # With the fallback, answered by retrieval from the best chunks.
    answer = ask(server, col, "When was the harbour built?", fallback="retrieval", top_k=2)
    assert answer["mode"] == "retrieval" and 1 <= len(answer["citations"]) <= 2
    assert answer["usage"]["prompt_tokens"] < 1024


def test_patch_switches_a_collection_to_full_mode_and_its_prefix_is_computed(server):
    # (A system prompt of its own: the same documents in another collection of the tenant
    # would make the same prefix, cached already.)
    col = new_collection(server, "switch", system_prompt="Answer from the sources, briefly.")
    for filename, text in FACTS.items():
        upload_text(server, col, filename, text)
    before = collection(server, col)
    assert before["mode"] == "retrieval" and before["full_prefix"]["state"] == "empty"
    assert ask(server, col, "Who rings the bell?", top_k=1)["mode"] == "retrieval"
    r = call(server, "PATCH", f"/v1/collections/{col}", json={"mode": "full", "name": "sw"})
    assert r.status_code == 200, r.text
    assert r.json()["mode"] == "full" and r.json()["name"] == "sw"
    assert r.json()["full_prefix"]["state"] in ("queued", "computing", "cached")
    prefix = wait_cached(server, col)
    answer = ask(server, col, "Who rings the bell?")
    assert answer["mode"] == "full" and cached_tokens(answer) >= prefix["tokens"]
    for bad in ({"mode": "everything"}, {"mode": None}, {"name": ""}, {"chunk_tokens": 9}):
        r = call(server, "PATCH", f"/v1/collections/{col}", json=bad)
        assert r.status_code == 400, (bad, r.text)
    assert collection(server, col)["mode"] == "full"
    back = call(server, "PATCH", f"/v1/collections/{col}", json={"mode": "retrieval"})
    assert back.json()["mode"] == "retrieval"
    assert ask(server, col, "Who rings the bell?", top_k=1)["mode"] == "retrieval"
    assert (
        call(server, "PATCH", "/v1/collections/col-nope", json={"mode": "full"}).status_code == 404
    )


def test_full_mode_cites_the_chunks_the_answer_quoted_not_every_chunk(server):
    col, docs = full_collection(server, "cited")
    every = all_chunk_ids(server, docs)
    assert len(every) >= 3
    mill = next(d for d in docs if d["filename"] == "mill.txt")
    quoted = all_chunk_ids(server, [mill])
    # The answer is held to a sentence of the mill's document (a grammar), so which chunk it
    # quotes is known; the model still generates it after the whole collection.
    forced = {"grammar": f'root ::= "{ETNA}"', "max_tokens": 40}
    answer = ask(server, col, "Where is Mount Etna?", **forced)
    assert answer["answer"] == ETNA and answer["mode"] == "full"
    cited = {c["chunk_id"] for c in answer["citations"]}
    assert cited == quoted and cited < every
    assert answer["citations"][0]["document_id"] == mill["id"]
    # Streamed: the mode first, the citations after the text.
    body = {"question": "Where is Mount Etna?", "temperature": 0, "stream": True, **forced}
    with httpx.stream(
        "POST", f"{server.base_url}/v1/collections/{col}/ask", json=body, timeout=180
    ) as r:
        citations = streamed_citations(r)
    assert {c["chunk_id"] for c in citations} == quoted


def test_deleting_a_document_takes_it_out_of_the_prefix(server):
    col, docs = full_collection(server, "deleted")
    before = wait_cached(server, col)
    gone = next(d for d in docs if d["filename"] == "orchard.txt")
    assert call(server, "DELETE", f"/v1/documents/{gone['id']}").status_code == 200

    def recomputed() -> dict | None:
        found = collection(server, col)["full_prefix"]
        return found if found["state"] == "cached" and found["tokens"] < before["tokens"] else None

    after = eventually(recomputed, "the prefix to be computed without the document")
    answer = ask(server, col, "When is the harvest festival?", max_tokens=12)
    assert answer["usage"]["prompt_tokens"] < before["tokens"]
    assert cached_tokens(answer) >= after["tokens"]
    assert gone["id"] not in {c["document_id"] for c in answer["citations"]}
