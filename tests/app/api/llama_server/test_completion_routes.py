"""llama-server's native POST /completion (and /completions) through a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from bench import llama_server_shapes
from bench.lib.server_process import ServerProcess
from tests.app.api.keyed_server import KeyedServer
from tests.app.api.llama_server.test_metrics_route import sample, scrape

PROMPT = "Hello, my name is"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "2", "-c", "2048") as srv:
        yield srv


def complete(server: ServerProcess, path: str = "/completion", **body: object) -> dict:
    r = httpx.post(server.base_url + path, json={"prompt": PROMPT, "temperature": 0, **body})
    assert r.status_code == 200, r.text
    return r.json()


def events(server: ServerProcess, **body: object) -> list[dict]:
    """The stream's data lines, parsed; fails on anything not JSON (a `[DONE]`)."""
    body = {"prompt": PROMPT, "temperature": 0, "stream": True, **body}
    with httpx.stream("POST", server.base_url + "/completion", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines), lines
    return [json.loads(line.removeprefix("data: ")) for line in lines]


def tokenize(server: ServerProcess, text: str) -> list[int]:
    body = {"content": text, "add_special": True}
    return httpx.post(server.base_url + "/tokenize", json=body).json()["tokens"]


def test_the_reply_has_llama_servers_fields(server: ServerProcess):
    reply = complete(server, n_predict=4)
    assert reply["stop"] is True and reply["index"] == 0
    assert reply["stop_type"] == "limit" and reply["stopping_word"] == ""
    assert reply["tokens_predicted"] == 4 and reply["tokens"] == []
    assert reply["tokens_evaluated"] == len(tokenize(server, PROMPT))
    assert reply["prompt"] == PROMPT and reply["truncated"] is False
    assert reply["has_new_line"] == ("\n" in reply["content"])
    assert reply["model"] == httpx.get(server.base_url + "/v1/models").json()["data"][0]["id"]
    timings = reply["timings"]
    assert timings["cache_n"] + timings["prompt_n"] == reply["tokens_evaluated"]
    assert timings["predicted_n"] == 4 and timings["id_slot"] == reply["id_slot"]
    # The slot's KV: the prompt and the generated tokens but the last, never decoded.
    assert reply["tokens_cached"] == reply["tokens_evaluated"] + 4 - 1
    settings = reply["generation_settings"]
    assert settings["n_predict"] == 4 and settings["temperature"] == 0
    assert settings["stream"] is False and settings["n_probs"] == 0
    assert "completion_probabilities" not in reply


def test_return_tokens_are_the_generated_ids(server: ServerProcess):
    reply = complete(server, n_predict=5, return_tokens=True)
    assert len(reply["tokens"]) == reply["tokens_predicted"] == 5
    text = httpx.post(server.base_url + "/detokenize", json={"tokens": reply["tokens"]}).json()
    assert text["content"] == reply["content"]


def test_n_probs_gives_each_tokens_probabilities(server: ServerProcess):
    reply = complete(server, n_predict=3, n_probs=2, return_tokens=True)
    probs = reply["completion_probabilities"]
    assert [p["id"] for p in probs] == reply["tokens"]
    assert "".join(p["token"] for p in probs) == reply["content"]
    for p in probs:
        top = p["top_logprobs"]
        assert len(top) == 2 and top[0]["logprob"] >= top[1]["logprob"]
        assert top[0] == {k: p[k] for k in ("id", "token", "bytes", "logprob")}  # greedy
        assert bytes(p["bytes"]).decode() == p["token"] and p["logprob"] <= 0


def test_post_sampling_probs_are_what_the_sampling_settings_leave(server: ServerProcess):
    reply = complete(server, n_predict=4, n_probs=5, post_sampling_probs=True, temperature=1.0)
    for p in reply["completion_probabilities"]:
        top = p["top_probs"]
        assert 0 < len(top) <= 5 and "logprob" not in p
        assert all(t["prob"] > 0 for t in top) and [t["prob"] for t in top] == sorted(
            (t["prob"] for t in top), reverse=True
        )
        assert p["id"] in [t["id"] for t in top] or p["prob"] <= top[-1]["prob"]
        if len(top) < 5:  # every token left is listed: they are the whole distribution
            assert sum(t["prob"] for t in top) == pytest.approx(1.0)
    # Greedy: the drawn token is the only one left, with probability 1.
    greedy = complete(server, n_predict=2, n_probs=5, post_sampling_probs=True)
    for p in greedy["completion_probabilities"]:
        assert p["top_probs"] == [{k: p[k] for k in ("id", "token", "bytes", "prob")}]
        assert p["prob"] == 1.0


def test_llama_servers_prompt_objects_and_lists(server: ServerProcess):
    plain = complete(server, n_predict=3)["content"]
    assert complete(server, n_predict=3, prompt={"prompt_string": PROMPT})["content"] == plain
    ids = httpx.post(server.base_url + "/tokenize", json={"content": PROMPT, "add_special": True})
    tokens = ids.json()["tokens"]
    for several in ([tokens, PROMPT], [tokens, {"prompt_string": PROMPT}]):
        body = {"prompt": several, "n_predict": 3, "temperature": 0}
        r = httpx.post(server.base_url + "/completion", json=body)
        assert [reply["content"] for reply in r.json()] == [plain, plain]
    media = {"prompt_string": PROMPT, "multimodal_data": ["iVBORw0KGgo="]}
    r = httpx.post(server.base_url + "/completion", json={"prompt": media})
    assert r.status_code == 400 and "multimodal_data" in r.json()["error"]["message"]


def test_a_stream_sends_deltas_then_the_final_fields_and_no_done(server: ServerProcess):
    whole = complete(server, n_predict=6)
    chunks = events(server, n_predict=6)
    *deltas, last = chunks
    assert all(c["stop"] is False and c["index"] == 0 for c in deltas)
    assert "".join(c["content"] for c in deltas) == whole["content"]
    assert sum(len(c["tokens"]) for c in deltas) == 6
    assert all(c["id_slot"] == last["id_slot"] for c in deltas)
    assert all("timings" not in c for c in deltas)
    assert last["stop"] is True and last["content"] == "" and last["stop_type"] == "limit"
    assert last["timings"]["predicted_n"] == 6 and last["generation_settings"]["stream"] is True
    assert set(whole) == set(last)


def test_a_stream_with_timings_per_token_and_progress(server: ServerProcess):
    first, *deltas, last = events(server, n_predict=3, timings_per_token=True, return_progress=True)
    progress = first["prompt_progress"]
    assert progress["total"] == progress["processed"] == last["tokens_evaluated"]
    assert progress["cache"] == last["timings"]["cache_n"] and first["content"] == ""
    assert [c["timings"]["predicted_n"] for c in deltas] == [1, 2, 3]
    assert all("prompt_progress" not in c for c in deltas)


def test_id_slot_pins_the_slot_and_an_unknown_one_is_refused(server: ServerProcess):
    for slot in (0, 1, 1, 0):
        assert complete(server, n_predict=1, id_slot=slot)["id_slot"] == slot
    assert complete(server, n_predict=1, id_slot=-1)["id_slot"] in (0, 1)
    r = httpx.post(server.base_url + "/completion", json={"prompt": PROMPT, "id_slot": 2})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "code": 400,
            "message": "id_slot 2 does not exist: this server has slots 0..1",
            "type": "invalid_request_error",
        }
    }


def test_cache_prompt_false_reuses_nothing(server: ServerProcess):
    body = {"prompt": "A repeated prompt about caching prompts in slots", "n_predict": 2}
    complete(server, **body, id_slot=0)
    again = complete(server, **body, id_slot=0, cache_prompt=False)
    assert again["timings"]["cache_n"] == 0
    assert again["timings"]["prompt_n"] == again["tokens_evaluated"]
    cached = complete(server, **body, id_slot=0)
    assert cached["timings"]["cache_n"] > 0


def test_stop_words_and_end_of_generation(server: ServerProcess):
    whole = complete(server, n_predict=8, n_probs=1)
    word = whole["completion_probabilities"][3]["token"]
    stopped = complete(server, n_predict=8, stop=[word])
    assert stopped["stop_type"] == "word" and stopped["stopping_word"] == word
    assert stopped["content"] == whole["content"][: whole["content"].index(word)]
    (eos,) = tokenize(server, "<|im_end|>")
    ended = complete(server, n_predict=8, logit_bias=[[eos, 100]])
    assert ended["stop_type"] == "eos" and ended["content"] == ""


def test_prompts_as_token_ids_or_mixed(server: ServerProcess):
    text = complete(server, n_predict=3)
    ids = tokenize(server, PROMPT)
    by_ids = complete(server, prompt=ids, n_predict=3)
    assert by_ids["content"] == text["content"] and by_ids["prompt"] == PROMPT
    (comma,) = httpx.post(server.base_url + "/tokenize", json={"content": ","}).json()["tokens"]
    mixed = complete(server, prompt=["Hello", comma, " my name is"], n_predict=3)
    assert mixed["content"] == text["content"]


def test_a_list_of_prompts_gets_a_list_of_results_in_order(server: ServerProcess):
    ids = tokenize(server, PROMPT)
    r = httpx.post(
        server.base_url + "/completion",
        json={"prompt": [["One two three"], ids], "n_predict": 3, "temperature": 0},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    results = r.json()
    assert [x["index"] for x in results] == [0, 1]
    assert [x["prompt"] for x in results] == ["One two three", PROMPT]
    assert all(x["tokens_predicted"] == 3 and x["stop"] for x in results)
    streamed = httpx.post(
        server.base_url + "/completion", json={"prompt": ["a", "b"], "stream": True}, timeout=60
    )
    assert streamed.status_code == 400 and "unstreamed" in streamed.json()["error"]["message"]


def test_grammar_and_json_schema_shape_the_reply(server: ServerProcess):
    yes_no = complete(server, grammar='root ::= "yes" | "no"', n_predict=4)
    assert yes_no["content"] in ("yes", "no")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    shaped = complete(server, json_schema=schema, n_predict=40)
    assert isinstance(json.loads(shaped["content"])["a"], int)


def test_errors_come_in_llama_servers_shape(server: ServerProcess):
    for body, words in (
        ({"n_predict": 1}, "prompt: is required"),
        ({"prompt": "x", "n_probs": 50}, "n_probs"),
        ({"prompt": "x", "grammar": "root ::= x", "json_schema": {"type": "object"}}, "one of"),
    ):
        r = httpx.post(server.base_url + "/completion", json=body)
        assert r.status_code == 400
        error = r.json()["error"]
        assert set(error) == {"code", "message", "type"} and error["code"] == 400
        assert words in error["message"]


def test_completions_is_the_native_endpoint_and_v1_stays_openai(server: ServerProcess):
    native = complete(server, "/completions", n_predict=2)
    assert native["stop"] is True and native["content"] == complete(server, n_predict=2)["content"]
    body = {"prompt": PROMPT, "max_tokens": 2, "temperature": 0}
    openai = httpx.post(server.base_url + "/v1/completions", json=body).json()
    assert openai["object"] == "text_completion"
    assert openai["choices"][0]["text"] == native["content"]


def test_requests_are_counted_under_the_completion_route(server: ServerProcess):
    before = scrape(server)
    complete(server, n_predict=1)
    httpx.post(server.base_url + "/completion", json={"prompt": "x", "id_slot": 9})
    after = scrape(server)
    for outcome in ("complete", "rejected"):
        key = {"route": "completion", "outcome": outcome}
        moved = sample(after, "kvchat_requests_total", **key)
        assert moved == sample(before, "kvchat_requests_total", **key) + 1


def test_keys_and_tenants_as_on_the_other_routes(keyed: KeyedServer):
    refused = httpx.post(keyed.url + "/completion", json={"prompt": "x"})
    assert refused.status_code == 401
    assert set(refused.json()["error"]) == {"code", "message", "type"}
    body = {"prompt": "A prompt that alice alone has sent to this server", "n_predict": 2}

    def cached(name: str) -> int:
        r = httpx.post(keyed.url + "/completion", json=body, headers=keyed.auth(name))
        assert r.status_code == 200, r.text
        return r.json()["timings"]["cache_n"]

    cached("alice")
    assert cached("alice") > 0
    assert cached("bob") == 0  # another tenant's prefix is never reused


def test_our_fields_include_llama_servers(server: ServerProcess, model_path: str):
    """The same requests as recorded from the real llama-server (bench.llama_server_shapes; CI
    does not build it): every field it sends, ours sends too, and greedy gives its tokens."""
    theirs = json.loads(llama_server_shapes.RECORDING.read_text())
    assert theirs["model"] == Path(model_path).name
    ours = llama_server_shapes.observed(server.base_url)
    for part in ("reply", "timings", "stream_partial", "stream_last"):
        assert set(theirs[part]) - set(ours[part]) == set(), part
    for part in ("probability", "top_logprob", "error"):
        assert set(theirs[part]) == set(ours[part]), part
    assert ours["tokens"] == theirs["tokens"]  # the same model, greedy
    assert ours["error_status"] == theirs["error_status"] == 400


def test_without_cache_prompt_a_repeated_request_repeats_its_answer(server: ServerProcess):
    """cache_prompt off computes the prompt anew each time, in the slot that held it last: the
    same KV cells, so the same sums and the same greedy answer (two slots, as llama-server's
    own test_consistent_result_same_seed)."""
    body = {"prompt": "I believe the meaning of life is", "n_predict": 48, "temperature": 0.0}
    answers = [complete(server, **body, cache_prompt=False, seed=42) for _ in range(4)]
    assert all(a["timings"]["cache_n"] == 0 for a in answers)
    assert len({a["content"] for a in answers}) == 1


def test_a_body_sent_as_a_form_or_without_a_type_is_read_as_json(server: ServerProcess):
    """`curl -d` sends a URL-encoded form's type; llama-server reads the body as JSON anyway."""
    body = json.dumps({"prompt": PROMPT, "n_predict": 2, "temperature": 0})
    for headers in ({"Content-Type": "application/x-www-form-urlencoded"}, {}):
        for path in ("/completion", "/v1/completions"):
            r = httpx.post(server.base_url + path, content=body, headers=headers)
            assert r.status_code == 200, r.text
    chat = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    r = httpx.post(server.base_url + "/v1/chat/completions", content=chat)
    assert r.status_code == 200, r.text


def test_when_the_shared_kv_fills_a_cut_reply_is_llama_servers_error_not_a_short_reply():
    """Four replies that together outgrow a 256-cell KV that each may fill (-kvu, llama-server's
    test_completion_unified): each is whole, or a 500 that says the context was exceeded; none
    is silently short."""
    with ServerProcess("-np", "4", "-c", "256", "-b", "32", "--kv-unified") as small:

        def one(n: int) -> httpx.Response:
            body = {"prompt": "A", "n_predict": n, "temperature": 0, "ignore_eos": True}
            return httpx.post(small.base_url + "/completion", json=body)

        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(one, [200] * 4))
        for r in replies:
            if r.status_code == 200:
                assert r.json()["timings"]["predicted_n"] == 200
            else:
                assert r.status_code == 500, r.text
                assert "context size has been exceeded" in r.json()["error"]["message"].lower()
        assert any(r.status_code == 500 for r in replies)  # any two at once outgrow 256 cells
