"""Full-document mode in chats, through a real server: a session turn or a chat completion whose
`rag` names a full-mode collection puts the collection's whole prefix (the one computed in the
background, the one `/ask` uses) before the conversation, so it computes only the conversation,
from any session and any API key of the tenant; its reply cites the chunks the answer quoted,
stored with the reply; a collection too long for the context is answered by retrieval and the
reply says so; a retrieval collection is answered as before."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from bench.lib.server_process import ServerProcess, make_key
from tests.app.api.keyed_server import KeyedServer
from tests.app.api.kvchat.test_full_mode import (
    ETNA,
    FACTS,
    LONG,
    cached_tokens,
    streamed_citations,
)
from tests.app.api.kvchat.test_full_mode_reuse import (
    as_tenant,
    full_prefix,
    tenant_collection,
    tenant_upload,
)
from tests.eventually import eventually


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> Iterator[KeyedServer]:
    """Tenant alice with two keys; 1024 tokens a request; full collections' prefixes computed in
    the background (retrieval collections' documents are not)."""
    data = tmp_path_factory.mktemp("chats")
    keys = {
        "alice": make_key(data, "alice"),
        "alice2": make_key(data, "alice-laptop", "--tenant", "alice"),
    }
    args = ["-np", "2", "-c", "2048", "--data-dir", str(data), "--doc-prefill-tokens", "0"]
    with ServerProcess(*args) as srv:
        yield KeyedServer(srv, data, keys)


def cached_prefix(keyed: KeyedServer, col: str) -> dict:
    def cached() -> dict | None:
        found = full_prefix(keyed, "alice", col)
        assert found["state"] in ("empty", "queued", "computing", "cached"), found
        return found if found["state"] == "cached" else None

    return eventually(cached, f"the prefix of {col} to be computed")


def new_session(keyed: KeyedServer, who: str, **fields: object) -> str:
    r = as_tenant(keyed, who, "POST", "/v1/sessions", json=fields)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def say(keyed: KeyedServer, who: str, sid: str, content: str, rag: dict, **body) -> dict:
    fields = {"content": content, "rag": rag, "max_tokens": 4, "temperature": 0, **body}
    r = as_tenant(keyed, who, "POST", f"/v1/sessions/{sid}/messages", json=fields)
    assert r.status_code == 200, r.text
    return r.json()


def stored(keyed: KeyedServer, sid: str) -> list[dict]:
    return as_tenant(keyed, "alice", "GET", f"/v1/sessions/{sid}").json()["messages"]


def chunk_ids(keyed: KeyedServer, doc: str) -> set[str]:
    chunks = as_tenant(keyed, "alice", "GET", f"/v1/documents/{doc}/chunks").json()["data"]
    return {c["id"] for c in chunks}


def test_session_turns_on_a_full_collection_reuse_its_prefix_from_every_session_and_key(keyed):
    col = tenant_collection(keyed, "alice", "full", list(FACTS))
    prefix = cached_prefix(keyed, col)
    rag = {"collection_ids": [col]}
    firsts = []
    # Two sessions, each through another key of the tenant (one with a system prompt of its
    # own, which follows the sources): the first turn of each finds the whole collection
    # computed in the background and computes only the conversation.
    for who, fields in (("alice", {}), ("alice2", {"system_prompt": "Answer in one line."})):
        sid = new_session(keyed, who, **fields)
        reply = say(keyed, who, sid, "When was the harbour built?", rag)
        assert reply["mode"] == "full"
        assert reply["usage"]["prompt_tokens"] > prefix["tokens"]
        assert cached_tokens(reply) >= prefix["tokens"]
        firsts.append((who, sid, reply))
    # A follow-up extends its session's prompt: the whole first turn is reused.
    who, sid, first = firsts[1]
    again = say(keyed, who, sid, "And who built it?", rag)
    assert again["mode"] == "full"
    turn = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"] - 1
    assert cached_tokens(again) >= turn
    # Regenerated: the same prompt again, all of it reused but the last token.
    body = {"rag": rag, "max_tokens": 4, "temperature": 0}
    r = as_tenant(keyed, who, "POST", f"/v1/sessions/{sid}/regenerate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["mode"] == "full"
    assert cached_tokens(r.json()) >= again["usage"]["prompt_tokens"] - 1
    # The stored user messages are the user's own words (the prefix is the collection's).
    asked = [m for m in stored(keyed, sid) if m["role"] == "user"]
    assert [m["content"] for m in asked] == ["When was the harbour built?", "And who built it?"]
    # A chat completion with the same rag, through the other key, and an /ask question reuse
    # it as well.
    body = {
        "messages": [{"role": "user", "content": "What does the mill grind?"}],
        "rag": rag,
        "max_tokens": 4,
        "temperature": 0,
    }
    chat = as_tenant(keyed, "alice2", "POST", "/v1/chat/completions", json=body)
    assert chat.status_code == 200, chat.text
    assert chat.json()["mode"] == "full" and cached_tokens(chat.json()) >= prefix["tokens"]
    ask = {"question": "What does the mill grind?", "max_tokens": 2, "temperature": 0}
    asked = as_tenant(keyed, "alice", "POST", f"/v1/collections/{col}/ask", json=ask).json()
    assert asked["mode"] == "full" and cached_tokens(asked) >= prefix["tokens"]


def test_a_full_mode_reply_cites_the_chunks_its_answer_quoted_and_keeps_them(keyed):
    col = tenant_collection(keyed, "alice", "full", list(FACTS))
    docs = as_tenant(keyed, "alice", "GET", f"/v1/collections/{col}/documents").json()["data"]
    every = set().union(*(chunk_ids(keyed, d["id"]) for d in docs))
    mill = next(d for d in docs if d["filename"] == "mill.txt")
    quoted = chunk_ids(keyed, mill["id"])
    assert quoted < every
    rag = {"collection_ids": [col]}
    # The answer is held to a sentence of the mill's document (a grammar), so which chunks
    # hold what it says is known; the model still generates it after the whole collection.
    forced = {"grammar": f'root ::= "{ETNA}"', "max_tokens": 40}
    sid = new_session(keyed, "alice")
    reply = say(keyed, "alice", sid, "Where is Mount Etna?", rag, **forced)
    message = reply["choices"][0]["message"]
    assert message["content"] == ETNA and reply["mode"] == "full"
    cited = {c["chunk_id"] for c in message["citations"]}
    assert cited and cited <= quoted
    assert reply["citations"] == message["citations"]
    # Stored with the reply, as the session gives it back (and the UI shows it).
    answer = stored(keyed, sid)[-1]
    assert answer["role"] == "assistant" and answer["mode"] == "full"
    assert answer["citations"] == message["citations"]
    # Streamed: the mode first, the citations after the text.
    body = {"content": "Where is Mount Etna?", "rag": rag, "stream": True, "temperature": 0}
    with httpx.stream(
        "POST",
        f"{keyed.url}/v1/sessions/{sid}/messages",
        json={**body, **forced},
        headers=keyed.auth("alice"),
        timeout=180,
    ) as r:
        citations = streamed_citations(r)
    assert {c["chunk_id"] for c in citations} <= quoted
    assert stored(keyed, sid)[-1]["citations"] == citations


def test_a_collection_too_long_for_the_context_is_answered_by_retrieval_and_says_so(keyed):
    col = tenant_collection(keyed, "alice", "full", [])
    tenant_upload(keyed, "alice", col, "ledger.txt", LONG)
    tenant_upload(keyed, "alice", col, "harbour.txt", FACTS["harbour.txt"])

    def sized() -> dict | None:
        found = full_prefix(keyed, "alice", col)
        return found if found["state"] == "too_long" else None

    prefix = eventually(sized, "the collection to be sized")
    assert prefix["tokens"] > prefix["n_ctx"] == 1024
    sid = new_session(keyed, "alice")
    rag = {"collection_ids": [col], "top_k": 2}
    reply = say(keyed, "alice", sid, "When was the harbour built?", rag)
    assert reply["mode"] == "retrieval"
    assert 1 <= len(reply["citations"]) <= 2
    assert reply["usage"]["prompt_tokens"] < 1024
    # Stored as any retrieval turn: the sources part before the user's words.
    asked = stored(keyed, sid)[0]
    assert asked["question"] == "When was the harbour built?"
    assert asked["citations"] == reply["citations"]


def test_a_retrieval_collection_and_a_mix_of_modes_are_answered_by_retrieval(keyed):
    full = tenant_collection(keyed, "alice", "full", list(FACTS))
    prefix = cached_prefix(keyed, full)
    plain = tenant_collection(keyed, "alice", "retrieval", ["orchard.txt"])
    for rag in ({"collection_ids": [plain]}, {"collection_ids": [full, plain]}):
        sid = new_session(keyed, "alice")
        reply = say(keyed, "alice", sid, "Who rings the bell?", {**rag, "top_k": 1})
        assert reply["mode"] == "retrieval"
        assert len(reply["citations"]) == 1
        assert reply["usage"]["prompt_tokens"] < prefix["tokens"]
        asked = stored(keyed, sid)[0]
        assert asked["content"][0]["text"].startswith("Sources:")
        assert asked["citations"] == reply["citations"]
        # Regenerated with its rag: the user's words asked again, the sources found anew.
        body = {"rag": {**rag, "top_k": 1}, "max_tokens": 4, "temperature": 0}
        r = as_tenant(keyed, "alice", "POST", f"/v1/sessions/{sid}/regenerate", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["mode"] == "retrieval" and r.json()["citations"] == reply["citations"]
        again = stored(keyed, sid)
        assert len(again) == 2 and again[0]["question"] == "Who rings the bell?"
        assert again[0]["content"] == asked["content"]


def test_several_full_collections_go_whole_in_the_order_the_rag_names_them(keyed):
    first = tenant_collection(keyed, "alice", "full", ["harbour.txt", "orchard.txt"])
    prefix = cached_prefix(keyed, first)
    second = tenant_collection(keyed, "alice", "full", [])
    mill = tenant_upload(keyed, "alice", second, "mill.txt", FACTS["mill.txt"])
    cached_prefix(keyed, second)
    chunks = as_tenant(keyed, "alice", "GET", f"/v1/documents/{mill}/chunks").json()["data"]
    sid = new_session(keyed, "alice")
    forced = {"grammar": f'root ::= "{ETNA}"', "max_tokens": 40}
    rag = {"collection_ids": [first, second]}
    reply = say(keyed, "alice", sid, "Where is Mount Etna?", rag, **forced)
    assert reply["mode"] == "full"
    # The first collection's prefix (computed in the background) is the prompt's start; the
    # second one's chunks follow it (computed by the turn, without their head).
    assert cached_tokens(reply) >= prefix["tokens"]
    assert reply["usage"]["prompt_tokens"] > prefix["tokens"] + sum(c["n_tokens"] for c in chunks)
    assert {c["document_id"] for c in reply["citations"]} == {mill}
