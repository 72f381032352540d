"""Documents through a real server: the packaged model, embedder, FAISS and SQLite."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import update

from app.db.documents.document_models import Collection
from app.db.store import Store
from bench.lib.server_process import ServerProcess
from tests.eventually import eventually
from tests.rag.pdfs import make_pdf

MAX_BYTES = 50_000
CATS = (
    "Cats are small domesticated felines. A cat purrs when it is content and sleeps up to "
    "sixteen hours a day. The oldest known cat lived to thirty-eight years."
)
ROCKETS = (
    "# Rockets\n\nThe Saturn V rocket burned liquid oxygen and kerosene in its first stage. "
    "It had five F-1 engines and carried astronauts to the Moon."
)
VOLCANO = "Mount Etna is an active volcano in Sicily. Its eruptions send lava down its slopes."
BREAD = "Sourdough bread rises with wild yeast and lactic bacteria kept in a flour starter."
TEA = "Green tea leaves are steamed or pan-fired soon after picking to stop oxidation."


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    args = ["-np", "2", "-c", "4096", "--data-dir", str(data), "--doc-max-bytes", str(MAX_BYTES)]
    # What questions alone put in the cache: no prefill of documents at ingest, which would
    # add cached prefixes at moments these tests do not wait for (tests/app/docs has it on).
    args += ["--doc-prefill-tokens", "0"]
    with ServerProcess(*args) as srv:
        yield srv


def call(server: ServerProcess, method: str, path: str, **kw) -> httpx.Response:
    return httpx.request(method, server.base_url + path, timeout=180, **kw)


def new_collection(server: ServerProcess, name: str, **fields: object) -> str:
    r = call(server, "POST", "/v1/collections", json={"name": name, **fields})
    assert r.status_code == 201, r.text
    assert r.json()["object"] == "collection" and r.json()["id"].startswith("col-")
    return r.json()["id"]


def wait_ready(server: ServerProcess, doc_id: str) -> dict:
    seen = []

    def ended() -> dict | None:
        doc = call(server, "GET", f"/v1/documents/{doc_id}").json()
        seen.append(doc["status"])
        return doc if doc["status"] in ("ready", "error") else None

    doc = eventually(ended, f"document {doc_id} to be ingested")
    assert set(seen) <= {"queued", "processing", "ready", "error"}, seen
    return doc


def upload(server: ServerProcess, col: str, name: str, data: bytes, mime: str) -> httpx.Response:
    return call(
        server, "POST", f"/v1/collections/{col}/documents", files={"file": (name, data, mime)}
    )


def upload_text(server: ServerProcess, col: str, filename: str, text: str) -> dict:
    r = call(
        server,
        "POST",
        f"/v1/collections/{col}/documents",
        json={"filename": filename, "text": text, "metadata": {"source": "test"}},
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] in ("queued", "processing", "ready")
    return wait_ready(server, r.json()["id"])


def ask(server: ServerProcess, col: str, question: str, **body) -> dict:
    r = call(
        server,
        "POST",
        f"/v1/collections/{col}/ask",
        json={"question": question, "max_tokens": 4, "temperature": 0, **body},
    )
    assert r.status_code == 200, r.text
    return r.json()


def n_tokens(server: ServerProcess, text: str) -> int:
    r = call(server, "POST", "/tokenize", json={"content": text, "add_special": False})
    return len(r.json()["tokens"])


def tail_tokens(server: ServerProcess, question: str) -> int:
    """Tokens after the chunks: the question and the template around it (a small margin)."""
    return n_tokens(server, "Question: " + question) + 8


def chunk_tokens(server: ServerProcess, doc_id: str) -> int:
    chunks = call(server, "GET", f"/v1/documents/{doc_id}/chunks").json()["data"]
    return sum(c["n_tokens"] for c in chunks)


@pytest.fixture(scope="module")
def library(server: ServerProcess) -> dict:
    """One collection with a .txt, a .md and a two-page PDF."""
    col = new_collection(server, "library")
    cats = upload_text(server, col, "cats.txt", CATS)
    r = call(
        server,
        "POST",
        f"/v1/collections/{col}/documents",
        files={"file": ("rockets.md", ROCKETS.encode(), "text/markdown")},
        data={"metadata": json.dumps({"topic": "space"})},
    )
    assert r.status_code == 202, r.text
    rockets = wait_ready(server, r.json()["id"])
    pdf = make_pdf(["An introduction with nothing much.", VOLCANO])
    r = call(
        server,
        "POST",
        f"/v1/collections/{col}/documents",
        files={"file": ("earth.pdf", pdf, "application/pdf")},
    )
    assert r.status_code == 202, r.text
    earth = wait_ready(server, r.json()["id"])
    return {"col": col, "cats": cats, "rockets": rockets, "earth": earth}


def test_ingest_txt_md_pdf_and_search_finds_the_right_document(server, library):
    for doc in (library["cats"], library["rockets"], library["earth"]):
        assert doc["status"] == "ready", doc
        assert doc["n_chunks"] >= 1 and doc["n_tokens"] > 0
        assert doc["progress"]["chunks_done"] == doc["progress"]["chunks_total"] == doc["n_chunks"]
    assert library["rockets"]["metadata"] == {"topic": "space"}
    col = library["col"]
    for query, doc, page in [
        ("How many engines did the Saturn V have?", "rockets", None),
        ("How long do cats sleep?", "cats", None),
        ("Which volcano erupts in Sicily?", "earth", 2),
    ]:
        r = call(server, "POST", f"/v1/collections/{col}/search", json={"query": query, "top_k": 2})
        assert r.status_code == 200, r.text
        best = r.json()["data"][0]
        assert best["document_id"] == library[doc]["id"], (query, r.json())
        assert best["page"] == page
    hybrid = call(
        server,
        "POST",
        f"/v1/collections/{col}/search",
        json={"query": "F-1 engines kerosene", "top_k": 1, "hybrid": True},
    ).json()["data"]
    assert hybrid[0]["document_id"] == library["rockets"]["id"]
    only = call(
        server,
        "POST",
        f"/v1/collections/{col}/search",
        json={"query": "engines", "document_ids": [library["cats"]["id"]]},
    ).json()["data"]
    assert {h["document_id"] for h in only} == {library["cats"]["id"]}


def test_citations_point_at_the_right_text(server, library):
    answer = ask(server, library["col"], "What did the Saturn V burn?", top_k=3)
    assert answer["object"] == "collection.answer" and isinstance(answer["answer"], str)
    assert answer["timings"]["retrieval_ms"] > 0
    texts = {"cats.txt": CATS, "rockets.md": ROCKETS}
    assert len(answer["citations"]) == 3
    for c in answer["citations"]:
        chunks = call(server, "GET", f"/v1/documents/{c['document_id']}/chunks").json()["data"]
        chunk = next(x for x in chunks if x["id"] == c["chunk_id"])
        assert (chunk["text"], chunk["index"]) == (c["text"], c["index"])
        if c["filename"] in texts:
            assert texts[c["filename"]][c["char_start"] : c["char_end"]] == c["text"]
    assert len({c["index"] for c in answer["citations"]}) == 3


def test_stream_sends_citations_before_the_text(server, library):
    events = []
    with httpx.stream(
        "POST",
        f"{server.base_url}/v1/collections/{library['col']}/ask",
        json={"question": "Why do cats purr?", "stream": True, "max_tokens": 3},
        timeout=180,
    ) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    first_text = next(
        i for i, e in enumerate(events) if e["choices"] and e["choices"][0]["delta"].get("content")
    )
    cites = [i for i, e in enumerate(events) if "citations" in e]
    assert len(cites) == 1 and cites[0] < first_text
    assert "retrieval_ms" in events[-1]["timings"]


def test_same_question_in_other_words_reuses_all_but_the_question(server):
    col = new_collection(server, "reword")
    for name, text in [("bread.txt", BREAD), ("tea.txt", TEA)]:
        upload_text(server, col, name, text)
    first = ask(server, col, "How does sourdough rise?", top_k=2)
    question = "What makes sourdough bread rise?"
    again = ask(server, col, question, top_k=2)
    assert [c["chunk_id"] for c in again["citations"]] == [
        c["chunk_id"] for c in first["citations"]
    ]
    usage = again["usage"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert cached >= usage["prompt_tokens"] - tail_tokens(server, question)
    assert again["timings"]["cache_n"] == cached


def test_overlapping_sets_reuse_the_common_part_cached_first(server):
    col = new_collection(server, "overlap")
    docs = [
        upload_text(server, col, f"{n}.txt", t)
        for n, t in [("v", VOLCANO), ("b", BREAD), ("t", TEA)]
    ]
    a, b, c = sorted(d["id"] for d in docs)  # canonical order: document id
    ask(server, col, "Tell me something.", top_k=2, document_ids=[b, c])  # prompt: head, b, c
    question = "Tell me one more thing."
    answer = ask(server, col, question, top_k=2, document_ids=[a, b])
    # Canonical order would be a, b; the cache holds head + b, so b comes first and is reused.
    assert [x["document_id"] for x in answer["citations"]] == [b, a]
    cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"]
    prompt = answer["usage"]["prompt_tokens"]
    assert cached >= prompt - tail_tokens(server, question) - chunk_tokens(server, a)
    assert cached < prompt - tail_tokens(server, question)  # a itself was not cached


def test_delete_is_never_retrieved_or_served_from_a_cache_again(server):
    col = new_collection(server, "forget")
    doc = upload_text(server, col, "tea.txt", TEA)
    question = "How is green tea made?"
    ask(server, col, question)
    warm = ask(server, col, question)
    prompt = warm["usage"]["prompt_tokens"]
    tail = tail_tokens(server, question)
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] >= prompt - tail
    r = call(server, "DELETE", f"/v1/documents/{doc['id']}")
    assert r.status_code == 200 and r.json()["deleted"] is True
    assert call(server, "GET", f"/v1/documents/{doc['id']}").status_code == 404
    hits = call(server, "POST", f"/v1/collections/{col}/search", json={"query": question}).json()
    assert hits["data"] == []
    # The same content again: its chunks get the same numbers, so the same token ids. A cache
    # that kept the deleted document's KV would serve all of it.
    again = upload_text(server, col, "tea.txt", TEA)
    assert again["id"] != doc["id"]
    cold = ask(server, col, question)
    assert cold["usage"]["prompt_tokens"] == prompt
    cached = cold["usage"]["prompt_tokens_details"]["cached_tokens"]
    # Served from a cache, the chunk would make cached >= head + chunk = prompt - real tail,
    # and `tail` overestimates the real tail. (The head, and a header's "[1]" shared with other
    # collections' chunks, may still be cached.)
    assert cached < prompt - tail


def test_same_content_again_is_a_duplicate(server, library):
    r = call(
        server,
        "POST",
        f"/v1/collections/{library['col']}/documents",
        json={"filename": "cats-copy.txt", "text": CATS},
    )
    assert r.status_code == 202
    assert r.json()["duplicate"] is True and r.json()["id"] == library["cats"]["id"]


@pytest.mark.parametrize(
    ("files", "status", "words"),
    [
        ({"file": ("empty.txt", b"", "text/plain")}, 400, "empty"),
        ({"file": ("junk.pdf", b"%PDF-1.4 junk junk", "application/pdf")}, 400, "PDF"),
        ({"file": ("tool.exe", b"MZ\x90\x00", "application/octet-stream")}, 400, "unsupported"),
        ({"file": ("big.txt", b"word " * (MAX_BYTES // 5 + 10), "text/plain")}, 413, "limit"),
    ],
)
def test_bad_uploads_are_refused_and_store_nothing(server, files, status, words):
    col = new_collection(server, "bad")
    r = call(server, "POST", f"/v1/collections/{col}/documents", files=files)
    assert r.status_code == status, r.text
    assert words in r.json()["error"]["message"] and r.json()["error"]["param"] == "file"
    assert call(server, "GET", f"/v1/collections/{col}/documents").json()["data"] == []
    assert call(server, "GET", "/health").status_code == 200


def test_other_tenants_and_unknown_ids_are_404(server):
    assert call(server, "GET", "/v1/collections/col-nope").status_code == 404
    assert call(server, "GET", "/v1/documents/doc-nope/chunks").status_code == 404
    r = call(server, "POST", "/v1/collections/col-nope/ask", json={"question": "hi"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    metrics = call(server, "GET", "/metrics").text
    assert 'kvchat_requests_total{outcome="rejected",route="ask"} 1.0' in metrics
    assert 'kvchat_requests_total{outcome="complete",route="ask"}' in metrics


def test_restart_keeps_collections_documents_and_search(tmp_path):
    args = ["-np", "1", "-c", "2048", "--data-dir", str(tmp_path)]
    query = {"query": "Which volcano is in Sicily?", "top_k": 2}
    with ServerProcess(*args) as srv:
        col = new_collection(srv, "kept")
        for name, text in [("v.txt", VOLCANO), ("b.txt", BREAD)]:
            upload_text(srv, col, name, text)
        before = call(srv, "POST", f"/v1/collections/{col}/search", json=query).json()
    [index_file] = (tmp_path / "indexes").glob(f"{col}.*faiss")
    index_file.unlink()
    with ServerProcess(*args) as srv:
        assert call(srv, "GET", f"/v1/collections/{col}").json()["n_documents"] == 2
        docs = call(srv, "GET", f"/v1/collections/{col}/documents").json()["data"]
        assert [d["status"] for d in docs] == ["ready", "ready"]
        assert index_file.exists()  # rebuilt from the database at start-up
        after = call(srv, "POST", f"/v1/collections/{col}/search", json=query).json()
    assert [h["chunk_id"] for h in after["data"]] == [h["chunk_id"] for h in before["data"]]
    for x, y in zip(after["data"], before["data"], strict=True):
        assert abs(x["score"] - y["score"]) < 1e-5


def test_chat_completions_take_rag_and_cite(server, library):
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url + "/v1", api_key="none", timeout=180)
    reply = client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "How many engines did the Saturn V have?"}],
        max_tokens=4,
        extra_body={"rag": {"collection_ids": [library["col"]], "top_k": 1}},
    )
    citations = reply.choices[0].message.model_extra["citations"]
    assert [c["document_id"] for c in citations] == [library["rockets"]["id"]]
    assert citations[0]["text"] in ROCKETS
    missing = call(
        server,
        "POST",
        "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "hi"}],
            "rag": {"collection_ids": ["col-x"]},
        },
    )
    assert missing.status_code == 404


def test_session_follow_up_reuses_the_whole_history(server, library):
    sid = call(server, "POST", "/v1/sessions", json={}).json()["id"]
    rag = {"collection_ids": [library["col"]], "top_k": 1}

    def turn(content: str) -> dict:
        r = call(
            server,
            "POST",
            f"/v1/sessions/{sid}/messages",
            json={"content": content, "rag": rag, "max_tokens": 6, "temperature": 0},
        )
        assert r.status_code == 200, r.text
        return r.json()

    first = turn("How long do cats sleep?")
    second = turn("And how long do cats sleep when old?")
    assert first["choices"][0]["message"]["citations"][0]["document_id"] == library["cats"]["id"]
    again = second["choices"][0]["message"]["citations"]
    assert [c["document_id"] for c in again] == [library["cats"]["id"]]
    # The whole first turn, but for its last token when max_tokens ended it (sampled, never
    # decoded, so not in the KV).
    history = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"] - 1
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= history
    messages = call(server, "GET", f"/v1/sessions/{sid}").json()["messages"]
    sources = [m["content"][0]["text"] for m in messages if m["role"] == "user"]
    # The chunk is in the conversation once; the follow-up cites it by its number.
    assert CATS[:40] in sources[0] and CATS[:40] not in sources[1]
    assert f"Sources [{again[0]['index']}] above." in sources[1]
    # The stored replies carry their turn's citations, as the replies did.
    stored = [m.get("citations") for m in messages if m["role"] == "assistant"]
    assert stored == [first["choices"][0]["message"]["citations"], again]


def test_a_session_document_turn_comes_back_with_the_users_words_apart(server, library):
    sid = call(server, "POST", "/v1/sessions", json={}).json()["id"]
    question = "How many engines did the Saturn V have?"

    def turn(rag: dict | None) -> dict:
        body = {"content": question, "max_tokens": 2, "temperature": 0}
        r = call(server, "POST", f"/v1/sessions/{sid}/messages", json={**body, "rag": rag})
        assert r.status_code == 200, r.text
        return r.json()

    cited = turn({"collection_ids": [library["col"]], "top_k": 1})["choices"][0]["message"]
    turn(None)
    asked, reply, plain, _ = call(server, "GET", f"/v1/sessions/{sid}").json()["messages"]
    # The user's own words and the sources, apart, as the reply cited them.
    assert asked["question"] == question
    assert asked["citations"] == reply["citations"] == cited["citations"]
    assert [c["document_id"] for c in asked["citations"]] == [library["rockets"]["id"]]
    # The content stays what the model saw: the sources part, then the user's words.
    sources, words = asked["content"]
    assert sources["text"].startswith("Sources:") and "five F-1 engines" in sources["text"]
    assert words == {"type": "text", "text": question}
    # A turn without `rag` has neither.
    assert plain["content"] == question
    assert "question" not in plain and "citations" not in plain


def test_a_restart_resumes_documents_left_unfinished(tmp_path):
    args = ["-np", "1", "-c", "2048", "--data-dir", str(tmp_path)]
    srv = ServerProcess(*args).start()
    try:
        col = new_collection(srv, "resume")
        r = call(
            srv,
            "POST",
            f"/v1/collections/{col}/documents",
            json={"filename": "b.txt", "text": BREAD},
        )
        doc_id = r.json()["id"]
        # The first document waits for the embedding model to load: it is not done yet.
        assert call(srv, "GET", f"/v1/documents/{doc_id}").json()["status"] != "ready"
        srv.proc.kill()  # no shutdown: the document stays queued or processing
        srv.proc.wait()
    finally:
        srv.stop()
    with ServerProcess(*args) as again:
        assert wait_ready(again, doc_id)["n_chunks"] == 1
        hits = call(again, "POST", f"/v1/collections/{col}/search", json={"query": "sourdough"})
        assert hits.json()["data"][0]["document_id"] == doc_id


def test_deleting_a_collection_deletes_its_documents(server):
    col = new_collection(server, "gone")
    doc = upload_text(server, col, "v.txt", VOLCANO)
    listed = call(server, "GET", "/v1/collections").json()["data"]
    assert [c["n_documents"] for c in listed if c["id"] == col] == [1]
    r = call(server, "DELETE", f"/v1/collections/{col}")
    assert r.status_code == 200 and r.json()["deleted"] is True
    assert call(server, "GET", f"/v1/collections/{col}").status_code == 404
    assert call(server, "GET", f"/v1/documents/{doc['id']}").status_code == 404
    assert call(server, "DELETE", f"/v1/collections/{col}").status_code == 404
    assert col not in {c["id"] for c in call(server, "GET", "/v1/collections").json()["data"]}


def test_a_collection_remembers_this_server_s_model(server):
    name = call(server, "GET", "/v1/models").json()["data"][0]["id"]
    col = new_collection(server, "named")
    assert call(server, "GET", f"/v1/collections/{col}").json()["model"] == name
    named = new_collection(server, "n", model=name)
    assert call(server, "GET", f"/v1/collections/{named}").json()["model"] == name
    r = call(server, "POST", "/v1/collections", json={"name": "x", "model": "not-here"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


def test_one_model_s_server_ingests_every_collection_s_documents(server):
    """A server of one model (no --docs-own-model) ingests as before collections had a model:
    one made before (no model) or under another name (the server was started with another
    model since) included."""
    data = server.args[server.args.index("--data-dir") + 1]
    store = Store(f"sqlite:///{data}/kvchat.db")
    try:
        for model in (None, "the model it had before"):
            col = new_collection(server, "older")
            with store.transaction(write=True) as s:
                s.execute(update(Collection).where(Collection.id == col).values(model=model))
            assert upload_text(server, col, "v.txt", VOLCANO)["status"] == "ready"
            assert call(server, "GET", f"/v1/collections/{col}").json()["model"] == model
    finally:
        store.close()
