"""GET /metrics through the real path: uvicorn + packaged model, scraped and parsed."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.lib.server_process import ServerProcess
from tests.eventually import eventually

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
# llama-server's series, in its order.
LLAMACPP_COUNTERS = ["prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total"]
LLAMACPP_COUNTERS += ["tokens_predicted_total", "tokens_predicted_seconds_total"]
LLAMACPP_COUNTERS += ["n_decode_total", "n_tokens_max", "spec_decode_num_draft_tokens_total"]
LLAMACPP_COUNTERS += ["spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total"]
LLAMACPP_GAUGES = ["prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing"]
LLAMACPP_GAUGES += ["requests_deferred", "n_busy_slots_per_decode"]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(
        "-np", "2", "-c", "2048", "--spec-type", "ngram-docs", "--spec-draft-cost", "0.1"
    ) as srv:
        yield srv


def scrape(server: ServerProcess) -> Samples:
    r = httpx.get(server.base_url + "/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_scrape_parses_and_has_engine_gauges(server: ServerProcess):
    samples = scrape(server)
    assert sample(samples, "kvchat_slots_total") == 2
    assert ("kvchat_slots_busy", frozenset()) in samples
    assert ("kvchat_queue_depth", frozenset()) in samples
    for source in ("own_slot", "other_slot", "host", "disk"):
        assert ("kvchat_prompt_tokens_cached_total", frozenset({("source", source)})) in samples


def test_bad_request_counts_as_rejected(server: ServerProcess):
    before = scrape(server)
    r = httpx.post(
        server.base_url + "/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400
    after = scrape(server)
    key = dict(route="chat", outcome="rejected")
    assert sample(after, "kvchat_requests_total", **key) == (
        sample(before, "kvchat_requests_total", **key) + 1
    )
    # Paths that are not generation requests are not counted.
    assert httpx.post(server.base_url + "/tokenize", content=b"{").status_code == 400
    requests = {k: v for k, v in scrape(server).items() if k[0] == "kvchat_requests_total"}
    assert requests == {k: v for k, v in after.items() if k[0] == "kvchat_requests_total"}


def test_completed_requests_move_the_counters(server: ServerProcess):
    """Needs the responder to call services.metrics.observe (wired by the lead)."""
    before = scrape(server)
    body = {
        "messages": [{"role": "user", "content": "Name one colour."}],
        "max_tokens": 4,
        "temperature": 0,
    }
    usages = []
    for _ in range(2):  # the second one reuses the first one's prefix
        r = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200
        usages.append(r.json()["usage"])
    after = scrape(server)

    def moved(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert moved("kvchat_requests_total", route="chat", outcome="complete") == 2
    assert moved("kvchat_prompt_tokens_total") == sum(u["prompt_tokens"] for u in usages)
    assert moved("kvchat_completion_tokens_total") == sum(u["completion_tokens"] for u in usages)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    assert cached > 0
    sources = ("own_slot", "other_slot", "host", "disk")
    assert sum(moved("kvchat_prompt_tokens_cached_total", source=s) for s in sources) == cached
    assert moved("kvchat_request_duration_seconds_count") == 2
    assert moved("kvchat_time_to_first_token_seconds_count") == 2


def test_cells_freed_under_kept_ones_compact_the_kv_and_it_still_serves(server: ServerProcess):
    """A long conversation leaves its slot (parked to host memory by the next task): the
    engine packs the KV cells in use (app/engine/kv/kv_compactor.py), and the long one comes back
    from host memory."""
    before = scrape(server)
    url = server.base_url + "/v1/chat/completions"
    long = {
        "messages": [{"role": "user", "content": "Rivers turn the mill wheels. " * 110}],
        "max_tokens": 2,
        "temperature": 0,
    }
    short = {"messages": [{"role": "user", "content": "Name a fruit."}], "max_tokens": 2}
    assert httpx.post(url, json=long).status_code == 200
    assert httpx.post(url, json=short).status_code == 200
    again = httpx.post(url, json=long)
    assert again.status_code == 200
    assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 500
    after = scrape(server)
    key = dict(op="compact", tier="kv")
    compacted = sample(after, "kvchat_cache_op_seconds_count", **key)
    assert compacted >= sample(before, "kvchat_cache_op_seconds_count", **key) + 1


def test_a_request_counts_as_arriving_until_it_is_queued_whatever_its_end(server: ServerProcess):
    """The engine's burst wait (app/engine/core/arrivals.py) reads this count: a ticket left pending
    would delay every later burst, so each way a request ends must settle it."""
    assert sample(scrape(server), "kvchat_requests_arriving") == 0
    body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(head.encode() + body[:10].encode())  # the body is still coming
        wait_for_arriving(server, 1)
        sock.sendall(body[10:].encode())
        reply = b""
        while b'"finish_reason"' not in reply:
            chunk = sock.recv(65536)
            assert chunk, reply
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200")
    # Refused before the engine saw them: a bad body, an unknown session, a bad parameter.
    url = server.base_url
    assert httpx.post(url + "/v1/chat/completions", content=b"{not json").status_code == 400
    assert httpx.post(url + "/v1/sessions/nope/messages", json={"content": "x"}).status_code == 404
    bad = {"messages": [{"role": "user", "content": "Hi"}], "temperature": -1}
    assert httpx.post(url + "/v1/chat/completions", json=bad).status_code == 400
    wait_for_arriving(server, 0)


def test_a_refused_regenerate_counts_as_a_rejected_session_turn(server: ServerProcess):
    before = scrape(server)
    url = server.base_url + "/v1/sessions/nope/regenerate"
    assert httpx.post(url, json={}).status_code == 404
    after = scrape(server)
    key = dict(route="session", outcome="rejected")
    assert sample(after, "kvchat_requests_total", **key) == (
        sample(before, "kvchat_requests_total", **key) + 1
    )
    wait_for_arriving(server, 0)


def wait_for_arriving(server: ServerProcess, n: int) -> None:
    """The gauge reaches n (it is read at scrape; the server settles a ticket as it goes on)."""

    def reads_n() -> bool:
        value = sample(scrape(server), "kvchat_requests_arriving")
        assert value == n, value
        return True

    eventually(reads_n, f"kvchat_requests_arriving to read {n}")


def test_speculation_is_reported_in_timings_and_counted(server: ServerProcess):
    """A reply that quotes its prompt is drafted (--spec-type): llama-server's timings
    fields per response, and the drafted and accepted counters move by them."""
    before = scrape(server)
    quote = "The Treaty of Calloway was signed on 14 March 1872 by Admiral Henrietta Voss."
    r = httpx.post(
        server.base_url + "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": f"Quote this exactly: {quote}"}],
            "temperature": 0,
            "max_tokens": 40,
        },
        timeout=120,
    )
    assert r.status_code == 200
    timings = r.json()["timings"]
    assert timings["draft_n"] >= timings["draft_n_accepted"] > 0
    after = scrape(server)
    for name, key in (
        ("kvchat_draft_tokens_total", "draft_n"),
        ("kvchat_draft_tokens_accepted_total", "draft_n_accepted"),
    ):
        assert sample(after, name) == sample(before, name) + timings[key]


def test_metrics_and_slots_can_be_turned_off():
    """--no-metrics and --no-slots: llama-server's 501 with its words (--no-slots turns off the
    listing only: tests/app/api/llama_server/test_slot_actions.py)."""
    with ServerProcess("-np", "1", "-c", "1024", "--no-metrics", "--no-slots") as srv:
        for path in ("/metrics", "/slots"):
            r = httpx.get(srv.base_url + path)
            assert r.status_code == 501, (path, r.text)
            error = r.json()["error"]
            assert error["type"] == "not_supported_error"
            assert "Start it with `--" in error["message"]
        assert httpx.get(srv.base_url + "/health").status_code == 200


def test_llama_servers_series_are_there_too(server: ServerProcess):
    before = scrape(server)
    r = httpx.post(
        server.base_url + "/v1/completions",
        json={"prompt": "Once upon a time", "max_tokens": 5, "ignore_eos": True},
        timeout=120,
    )
    assert r.status_code == 200
    usage = r.json()["usage"]
    after = scrape(server)
    computed = usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]
    assert sample(after, "llamacpp:prompt_tokens_total") == (
        sample(before, "llamacpp:prompt_tokens_total") + computed
    )
    assert sample(after, "llamacpp:tokens_predicted_total") == (
        sample(before, "llamacpp:tokens_predicted_total") + 5
    )
    assert sample(after, "llamacpp:tokens_predicted_seconds_total") > sample(
        before, "llamacpp:tokens_predicted_seconds_total"
    )
    assert sample(after, "llamacpp:predicted_tokens_seconds") > 0
    # The rates cover what ended since the last scrape (llama-server's buckets): nothing now.
    again = scrape(server)
    assert sample(again, "llamacpp:predicted_tokens_seconds") == 0
    assert sample(again, "llamacpp:tokens_predicted_total") == sample(
        after, "llamacpp:tokens_predicted_total"
    )
    assert ("llamacpp:requests_processing", frozenset()) in after
    assert ("llamacpp:requests_deferred", frozenset()) in after
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert sample(after, "llamacpp:prompt_tokens_cached_total") == (
        sample(before, "llamacpp:prompt_tokens_cached_total") + cached
    )
    # The prompt's decodes and one per generated token but the first (from the prompt's last
    # batch), the drafts' verification steps aside.
    decodes = sample(after, "llamacpp:n_decode_total") - sample(before, "llamacpp:n_decode_total")
    assert 4 <= decodes <= 4 + computed
    # (prometheus_client's parser names a counter's sample with _total)
    assert sample(after, "llamacpp:n_tokens_max_total") >= usage["prompt_tokens"] + 5
    assert sample(after, "llamacpp:n_busy_slots_per_decode") >= 1


def test_llama_servers_text_and_header():
    """llama-server's own lines for its series (HELP, TYPE, value; no labels, nothing more), in
    its order, and its Process-Start-Time-Unix header, spelled as it spells it."""
    with ServerProcess("-np", "1", "-c", "1024") as srv:
        r = httpx.get(srv.base_url + "/metrics")
        raw = dict(r.headers.raw)
    started = int(raw[b"Process-Start-Time-Unix"])
    assert 0 < time.time() - started < 3600
    ours = [line for line in r.text.splitlines() if "llamacpp:" in line]
    names = [line.split()[2] for line in ours if line.startswith("# TYPE")]
    assert names == [f"llamacpp:{n}" for n in LLAMACPP_COUNTERS + LLAMACPP_GAUGES]
    for i, name in enumerate(names):
        kind = "counter" if i < len(LLAMACPP_COUNTERS) else "gauge"
        help_line, type_line, value_line = ours[3 * i : 3 * i + 3]
        assert help_line.startswith(f"# HELP {name} ") and type_line == f"# TYPE {name} {kind}"
        assert value_line.split()[0] == name and float(value_line.split()[1]) >= 0
