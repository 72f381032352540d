"""Blend: which requests blend (request, then collection, then --kv-reuse), and through the
real server `"kv_reuse": "blend"` on /ask, chat `rag`, session turns and collections. The
packaged SmolLM2 does not pass blend's quality gate (app/engine/blend/blend_gate.py): on a default
server its blend requests keep prefix reuse and say why; the server of the blend tests forces
blend on (--blend-force), and its replies carry the measured agreement."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from app.db.documents.document_records import CollectionRecord
from app.docs.questions.blend_request import collection_blends, reuse_mode, wants_blend
from app.engine.blend.blend_gate import gate
from app.engine.reuse_kinds import KvReuse
from tests.app.api.kvchat.test_document_routes import (
    CATS,
    ROCKETS,
    VOLCANO,
    call,
    new_collection,
    tail_tokens,
    upload_text,
)
from tests.server import ServerProcess

K = 6  # not the packaged model's default k (4), so the flag is seen to win
MODES = (None, "prefix", "blend")


def collection(kv_reuse: str | None) -> CollectionRecord:
    return CollectionRecord("col-1", "", "c", 64, 8, None, datetime.now(UTC), kv_reuse=kv_reuse)


@pytest.mark.parametrize("default", ["prefix", "blend"])
@pytest.mark.parametrize("own", MODES)
@pytest.mark.parametrize("asked", MODES)
def test_the_request_says_else_the_collection_else_the_server(asked, own, default):
    expected = asked if asked is not None else own if own is not None else default
    assert reuse_mode(asked, collection(own), default) is KvReuse(expected)
    assert wants_blend(asked, collection(own), default) == (expected == "blend")


def test_a_collection_blends_by_its_own_setting_else_the_server_default():
    assert collection_blends(collection("blend"), "prefix")
    assert not collection_blends(collection("prefix"), "blend")
    assert collection_blends(collection(None), "blend")
    assert not collection_blends(collection(None), "prefix")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("data")
    cache = tmp_path_factory.mktemp("kv")
    args = ["-np", "2", "-c", "4096", "--data-dir", str(data), "--cache-dir", str(cache)]
    # Only what these tests ask is cached: no document prefill at ingest.
    args += ["--doc-prefill-tokens", "0", "--blend-sink-tokens", str(K), "--blend-force"]
    with ServerProcess(*args) as srv:
        yield srv


# What the gate says of the packaged model: refused by default, forced at K on the server above.
REFUSED = gate("smollm2", "135m", -1, force=False)
FORCED = gate("smollm2", "135m", K, force=True)


@pytest.fixture(scope="module")
def docs(server: ServerProcess) -> dict:
    col = new_collection(server, "blend")
    named = {"cats": CATS, "rockets": ROCKETS, "volcano": VOLCANO}
    ids = {
        name: upload_text(server, col, f"{name}.txt", text)["id"] for name, text in named.items()
    }
    return {"col": col, **ids}


def ask(server: ServerProcess, col: str, question: str, ids: list[str], **body) -> dict:
    """An /ask that blends unless `body` says otherwise; a field given as None is left out."""
    fields = {
        "question": question,
        "document_ids": ids,
        "top_k": len(ids),
        "max_tokens": 2,
        "temperature": 0,
        "kv_reuse": "blend",
        **body,
    }
    r = call(
        server,
        "POST",
        f"/v1/collections/{col}/ask",
        json={k: v for k, v in fields.items() if v is not None},
    )
    assert r.status_code == 200, r.text
    return r.json()


def chat_turn(server: ServerProcess, content: str, rag: dict | None = None) -> dict:
    """One chat completion of 2 tokens (with `rag` when given); its reply, which must be a 200."""
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 2}
    r = call(server, "POST", "/v1/chat/completions", json={**body, **({"rag": rag} if rag else {})})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_new_combination_computes_k_tokens_per_chunk_and_the_question(server, docs):
    col = docs["col"]
    first = ask(server, col, "How long do cats sleep?", [docs["cats"], docs["rockets"]])
    # Chunks met for the first time are computed (each on its own): nothing is cached.
    assert first["timings"]["kv_reuse"] == "blend"
    # Forced past the gate: the reply says how often blend matched full prefill at this k.
    assert FORCED.agreement is not None
    assert first["timings"]["kv_reuse_agreement"] == FORCED.agreement.as_dict()
    assert first["timings"]["cache_sources"]["chunk"] == 0
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    ask(server, col, "Where is Etna?", [docs["volcano"]])
    question = "Which rocket went near the volcano?"
    new = ask(server, col, question, [docs["volcano"], docs["rockets"]])
    t, usage = new["timings"], new["usage"]
    assert t["cache_sources"]["chunk"] > 0
    # Computed: k tokens of each placed chunk (at most two), and what follows them.
    assert t["prompt_n"] <= 2 * K + tail_tokens(server, question)
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] - t["prompt_n"]
    # The same prompt with prefix reuse only: no blended KV serves it.
    exact = ask(server, col, question, [docs["volcano"], docs["rockets"]], kv_reuse="prefix")
    assert "kv_reuse" not in exact["timings"] and exact["timings"]["cache_sources"]["chunk"] == 0
    assert exact["timings"]["prompt_n"] > t["prompt_n"] + t["cache_sources"]["chunk"] // 2


def test_another_tenant_never_gets_the_chunks(server, docs):
    col = docs["col"]
    ids = [docs["cats"], docs["volcano"]]
    ask(server, col, "What purrs?", ids, cache_salt="tenant-a")
    other = ask(server, col, "What purrs?", ids, cache_salt="tenant-b")
    assert other["timings"]["cache_sources"]["chunk"] == 0
    assert other["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_a_blended_prompt_parked_in_host_memory_serves_blend_requests_only(server, docs):
    col, ids, salt = docs["col"], [docs["rockets"], docs["cats"]], "parked"
    question = "Does a cat burn kerosene?"
    first = ask(server, col, question, ids, cache_salt=salt)
    assert first["timings"]["kv_reuse"] == "blend"
    # Another prompt takes a slot: the idle slot's KV is saved to host memory and its cells
    # freed (parked), the blended part apart from the exact one.
    chat_turn(server, "Count to three.")
    again = ask(server, col, question, ids, cache_salt=salt)["timings"]
    assert again["cache_sources"]["host"] > 0 and again["cache_sources"]["chunk"] > 0
    assert again["prompt_n"] == 1  # an exact repeat: all but the last token restored
    # A prefix request never gets blended KV, from host memory either.
    exact = ask(server, col, question, ids, cache_salt=salt, kv_reuse="prefix")["timings"]
    assert exact["cache_sources"]["chunk"] == 0
    assert exact["prompt_n"] > K  # from where the blended KV starts, computed


def test_deleting_a_document_purges_its_chunk_kv_from_every_tier(server):
    col = new_collection(server, "blend-forget")
    doc = upload_text(server, col, "tea.txt", VOLCANO + " Tea grows on its slopes.")
    question = "What grows on Etna?"
    ask(server, col, question, [doc["id"]])
    again = ask(server, col, "What grows there?", [doc["id"]])
    assert again["timings"]["cache_sources"]["chunk"] + again["timings"]["prompt_n"] > 0
    assert call(server, "DELETE", f"/v1/documents/{doc['id']}").status_code == 200
    # The same text again: the same chunk tokens, so the same chunk key. Had the host or the
    # disk tier kept the deleted document's chunk KV, it would be placed.
    same = upload_text(server, col, "tea.txt", VOLCANO + " Tea grows on its slopes.")
    cold = ask(server, col, "What grows on the slopes?", [same["id"]], cache_salt="fresh")
    assert cold["timings"]["cache_sources"]["chunk"] == 0
    warm = ask(server, col, "What grows on the slopes?", [same["id"]], cache_salt="fresh2")
    assert warm["timings"]["cache_sources"]["chunk"] == 0  # another tenant: computed again


def test_chat_and_session_turns_blend_their_sources(server, docs):
    rag = {
        "collection_ids": [docs["col"]],
        "document_ids": [docs["cats"], docs["rockets"]],
        "top_k": 2,
        "kv_reuse": "blend",
    }
    ask(server, docs["col"], "Tell me.", [docs["cats"], docs["rockets"]])  # chunks computed
    chat = chat_turn(server, "What did the Saturn V burn?", rag)
    assert chat["timings"]["kv_reuse"] == "blend"
    assert chat["timings"]["cache_sources"]["chunk"] > 0
    sid = call(server, "POST", "/v1/sessions", json={}).json()["id"]
    r = call(
        server,
        "POST",
        f"/v1/sessions/{sid}/messages",
        json={"content": "What purrs?", "rag": rag, "max_tokens": 2, "temperature": 0},
    )
    assert r.status_code == 200, r.text
    assert r.json()["timings"]["cache_sources"]["chunk"] > 0
    bad = call(
        server,
        "POST",
        f"/v1/sessions/{sid}/messages",
        json={"content": "x", "rag": {**rag, "kv_reuse": "always"}},
    )
    assert bad.status_code == 400 and "kv_reuse" in bad.text


def test_a_collection_that_blends_makes_its_questions_blend(server, docs):
    r = call(server, "POST", "/v1/collections", json={"name": "blends", "kv_reuse": "blend"})
    assert r.status_code == 201, r.text
    col = r.json()
    assert col["kv_reuse"] == "blend"
    assert call(server, "GET", f"/v1/collections/{col['id']}").json()["kv_reuse"] == "blend"
    listed = call(server, "GET", "/v1/collections").json()["data"]
    assert {c["id"]: c["kv_reuse"] for c in listed}[col["id"]] == "blend"
    assert {c["id"]: c["kv_reuse"] for c in listed}[docs["col"]] is None
    doc = upload_text(server, col["id"], "cats.txt", CATS)["id"]
    # No `kv_reuse` in the request: the collection's.
    own = ask(server, col["id"], "How long do cats sleep?", [doc], kv_reuse=None)
    assert own["timings"]["kv_reuse"] == "blend"
    # The request's `kv_reuse` wins over the collection's.
    asked = ask(server, col["id"], "How long do cats sleep?", [doc], kv_reuse="prefix")
    assert "kv_reuse" not in asked["timings"]
    # A chat's `rag` that does not say: its first collection's.
    rag = {"collection_ids": [col["id"]], "document_ids": [doc], "top_k": 1}
    assert chat_turn(server, "Do cats purr?", rag)["timings"]["kv_reuse"] == "blend"
    # A collection that does not say takes the server's --kv-reuse (prefix here).
    plain = ask(server, docs["col"], "How long do cats sleep?", [docs["cats"]], kv_reuse=None)
    assert "kv_reuse" not in plain["timings"]


def test_a_collection_with_an_unknown_kv_reuse_is_refused(server):
    r = call(server, "POST", "/v1/collections", json={"name": "bad", "kv_reuse": "always"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "kv_reuse"


def test_props_show_the_k_the_flag_set_and_blend_forced_on(server):
    props = call(server, "GET", "/props").json()
    assert props["kv_reuse"] == {
        "default": "prefix",
        "blend_sink_tokens": K,
        "blend_available": True,
        "blend_reason": None,
        "blend_forced": True,
        "blend_agreement": FORCED.agreement.as_dict(),
    }


@pytest.fixture(scope="module")
def default_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """The packaged model with no blend flag: the gate turns blend off."""
    data = tmp_path_factory.mktemp("data-default")
    args = ["-np", "2", "-c", "4096", "--data-dir", str(data), "--doc-prefill-tokens", "0"]
    with ServerProcess(*args) as srv:
        yield srv


def test_without_the_force_flag_a_blend_question_keeps_prefix_reuse_and_says_why(default_server):
    assert REFUSED.refused is not None and "0%" in REFUSED.refused
    col = new_collection(default_server, "gated", kv_reuse="blend")
    doc = upload_text(default_server, col, "cats.txt", CATS)["id"]
    for body in ({"kv_reuse": "blend"}, {"kv_reuse": None}):  # the request's, the collection's
        t = ask(default_server, col, "How long do cats sleep?", [doc], **body)["timings"]
        assert t["kv_reuse"] == "prefix" and t["kv_reuse_reason"] == REFUSED.refused
        assert t["cache_sources"]["chunk"] == 0 and "kv_reuse_agreement" not in t
    rag = {"collection_ids": [col], "document_ids": [doc], "top_k": 1, "kv_reuse": "blend"}
    chat = chat_turn(default_server, "Do cats purr?", rag)["timings"]
    assert chat["kv_reuse"] == "prefix" and chat["kv_reuse_reason"] == REFUSED.refused


def test_props_say_blend_is_off_and_why(default_server):
    props = call(default_server, "GET", "/props").json()
    assert props["kv_reuse"] == {
        "default": "prefix",
        "blend_sink_tokens": REFUSED.k,
        "blend_available": False,
        "blend_reason": REFUSED.refused,
        "blend_forced": False,
        "blend_agreement": REFUSED.agreement.as_dict(),
    }
