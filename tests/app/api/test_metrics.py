"""`Metrics` on its own: counters move by exactly what an outcome says, gauges read at scrape."""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.api.metrics import SOURCES, EngineGauges, Metrics, route_of
from app.api.outcome import RequestOutcome


class FakeEngine:
    def __init__(self) -> None:
        self.gauges = EngineGauges(slots_total=4, slots_busy=0, queue_depth=0)
        self.fail = False

    def __call__(self) -> EngineGauges:
        if self.fail:
            raise RuntimeError("engine stopped")
        return self.gauges


@pytest.fixture()
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture()
def metrics(engine: FakeEngine) -> Metrics:
    return Metrics(engine)


def value(m: Metrics, name: str, **labels: str) -> float:
    v = m.registry.get_sample_value(name, labels)
    assert v is not None, f"no sample {name}{labels}"
    return v


def done(**kw: object) -> RequestOutcome:
    base: dict[str, object] = dict(route="chat", outcome="complete", status=200, slot=1)
    base |= dict(prompt_tokens=100, cached_tokens=60, cache_source="host", completion_tokens=7)
    base |= dict(ttft_s=0.05, e2e_s=0.4, finish_reason="stop")
    return RequestOutcome(**(base | kw))  # type: ignore[arg-type]


def test_every_series_exists_at_zero_before_the_first_request(metrics: Metrics):
    for source in SOURCES:
        assert value(metrics, "kvchat_prompt_tokens_cached_total", source=source) == 0
    assert value(metrics, "kvchat_requests_total", route="chat", outcome="rejected") == 0
    assert value(metrics, "kvchat_prompt_tokens_total") == 0
    assert value(metrics, "kvchat_request_duration_seconds_count") == 0
    assert value(metrics, "kvchat_cache_op_seconds_count", op="compact", tier="kv") == 0


def test_complete_request_moves_counters_by_its_amounts(metrics: Metrics):
    metrics.observe(done())
    metrics.observe(done(cached_tokens=30, cache_source="own_slot", completion_tokens=3))
    assert value(metrics, "kvchat_requests_total", route="chat", outcome="complete") == 2
    assert value(metrics, "kvchat_requests_total", route="completion", outcome="complete") == 0
    assert value(metrics, "kvchat_prompt_tokens_total") == 200
    assert value(metrics, "kvchat_completion_tokens_total") == 10
    assert value(metrics, "kvchat_prompt_tokens_cached_total", source="host") == 60
    assert value(metrics, "kvchat_prompt_tokens_cached_total", source="own_slot") == 30
    assert value(metrics, "kvchat_prompt_tokens_cached_total", source="other_slot") == 0
    assert value(metrics, "kvchat_prompt_tokens_cached_total", source="disk") == 0
    assert value(metrics, "kvchat_time_to_first_token_seconds_count") == 2
    assert value(metrics, "kvchat_time_to_first_token_seconds_sum") == pytest.approx(0.1)
    assert value(metrics, "kvchat_request_duration_seconds_count") == 2
    assert value(metrics, "kvchat_request_duration_seconds_bucket", le="0.5") == 2
    assert value(metrics, "kvchat_request_duration_seconds_bucket", le="0.25") == 0


def test_only_complete_requests_feed_the_latency_histograms(metrics: Metrics):
    metrics.observe(done(outcome="cancelled", status=200, finish_reason=None))
    metrics.observe(RequestOutcome(route="completion", outcome="rejected", status=400))
    metrics.observe(done(ttft_s=None, completion_tokens=0, cache_source="none", cached_tokens=0))
    assert value(metrics, "kvchat_requests_total", route="chat", outcome="cancelled") == 1
    assert value(metrics, "kvchat_requests_total", route="completion", outcome="rejected") == 1
    # The cancelled one still cost its tokens; only the last (complete) one has a latency.
    assert value(metrics, "kvchat_prompt_tokens_total") == 200
    assert value(metrics, "kvchat_completion_tokens_total") == 7
    assert value(metrics, "kvchat_request_duration_seconds_count") == 1
    assert value(metrics, "kvchat_time_to_first_token_seconds_count") == 0  # ttft was None


def test_gauges_are_read_at_scrape_time(metrics: Metrics, engine: FakeEngine):
    engine.gauges = EngineGauges(slots_total=2, slots_busy=1, queue_depth=3)
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["kvchat_slots_total"].samples[0].value == 2
    assert families["kvchat_slots_busy"].samples[0].value == 1
    assert families["kvchat_queue_depth"].samples[0].value == 3
    engine.gauges = EngineGauges(slots_total=2, slots_busy=0, queue_depth=0)
    assert value(metrics, "kvchat_slots_busy") == 0


def test_background_tasks_are_gauged_and_counted_by_kind(metrics: Metrics, engine: FakeEngine):
    engine.gauges = EngineGauges(
        slots_total=2,
        slots_busy=1,
        queue_depth=0,
        background_queued={"prefill": 0, "chunk_kv": 5},
        background_running={"prefill": 0, "chunk_kv": 1},
        background_completed={"prefill": 2, "chunk_kv": 7, "compaction": 1},
    )
    assert value(metrics, "kvchat_background_tasks_queued", kind="chunk_kv") == 5
    assert value(metrics, "kvchat_background_tasks_queued", kind="prefill") == 0
    assert value(metrics, "kvchat_background_tasks_running", kind="chunk_kv") == 1
    assert value(metrics, "kvchat_background_tasks_completed_total", kind="chunk_kv") == 7
    assert value(metrics, "kvchat_background_tasks_completed_total", kind="compaction") == 1


def test_scrape_survives_an_engine_that_cannot_answer(metrics: Metrics, engine: FakeEngine):
    engine.fail = True
    body, _ = metrics.render()
    assert b"kvchat_requests_total" in body
    assert metrics.registry.get_sample_value("kvchat_slots_total") is None


def test_two_instances_do_not_collide(engine: FakeEngine):
    a, b = Metrics(engine), Metrics(engine)
    a.observe(done())
    assert value(b, "kvchat_prompt_tokens_total") == 0


def test_one_json_log_line_per_request(metrics: Metrics, caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="kvchat.requests"):
        metrics.observe(done(session_id="s-1"))
    records = [r for r in caplog.records if r.name == "kvchat.requests"]
    assert len(records) == 1 and records[0].levelno == logging.INFO
    line = json.loads(records[0].getMessage())
    assert line == {
        "event": "request",
        "route": "chat",
        "outcome": "complete",
        "status": 200,
        "slot": 1,
        "session_id": "s-1",
        "prompt_tokens": 100,
        "cached_tokens": 60,
        "cache_source": "host",
        "completion_tokens": 7,
        "ttft_s": 0.05,
        "e2e_s": 0.4,
        "finish_reason": "stop",
        "draft_tokens": 0,
        "draft_tokens_accepted": 0,
        "prompt_ms": 0.0,
        "predicted_ms": 0.0,
    }


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/v1/chat/completions", "chat"),
        ("/v1/completions", "completion"),
        ("/v1/sessions", None),
        ("/v1/sessions/abc", None),
        ("/v1/sessions/abc/messages", "session"),
        ("/v1/sessions/abc/regenerate", "session"),
        ("/v1/models", None),
        ("/tokenize", None),
        ("/v1/sessionsx", None),
        ("/v1/messages", "messages"),
        ("/v1/responses", "responses"),
        ("/v1/responses/resp_1", None),
        ("/v1/embeddings", None),
    ],
)
def test_route_of_path(path: str, route: str | None):
    assert route_of(path) == route


def test_only_posts_are_generation_requests():
    assert route_of("/v1/sessions/abc/messages", "GET") is None
    assert route_of("/v1/chat/completions", "POST") == "chat"
