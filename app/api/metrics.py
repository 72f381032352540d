"""Prometheus metrics for `/metrics` and the one-JSON-line-per-request log (`kvchat.requests`).

Names follow llama-server's where they overlap (llamacpp:prompt_tokens_total ->
kvchat_prompt_tokens_total), so dashboards written for one read the other with a prefix change.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.api.llama_server.llamacpp_metrics import LlamaCppMetrics, LlamaCppState
from app.api.outcome import RequestOutcome
from app.engine.reuse_kinds import TIERS

log = logging.getLogger(__name__)
request_log = logging.getLogger("kvchat.requests")

ROUTES = ("chat", "completion", "session", "ask", "messages", "responses")
OUTCOMES = ("complete", "cancelled", "error", "rejected")
SOURCES = TIERS  # "none" has no cached tokens to count
# 1 ms (a cached one-token reply) .. 120 s (a long generation on a slow CPU model).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BUCKETS += (20.0, 30.0, 60.0, 120.0)
# Engine-thread time of one KV tier move: 0.1 ms .. 1 s (a large state on a slow disk).
OP_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
CACHE_OPS = (("save", "host"), ("save", "disk"), ("restore", "host"), ("restore", "disk"))
CACHE_OPS += (("compact", "kv"),)  # packing the KV's cells in use (app/engine/kv/kv_compactor.py)


def route_of(path: str, method: str = "POST") -> str | None:
    """The route label for a request path; None for paths that are not generation requests."""
    path = path.rstrip("/")
    if method != "POST":
        return None
    if path in ("/v1/chat/completions", "/chat/completions"):  # llama-server serves both
        return "chat"
    if path in ("/v1/completions", "/completions", "/completion"):
        return "completion"
    if path.startswith("/v1/sessions/") and path.endswith(("/messages", "/regenerate")):
        return "session"  # a turn; creating, listing or deleting sessions generates nothing
    if path.startswith("/v1/collections/") and path.endswith("/ask"):
        return "ask"  # a document question
    if path == "/v1/messages":
        return "messages"  # Anthropic's Messages API
    if path == "/v1/responses":
        return "responses"  # OpenAI's Responses API
    return None


@dataclass(slots=True)
class EngineGauges:
    slots_total: int
    slots_busy: int
    queue_depth: int
    arriving: int = 0  # generation requests received, not yet queued (app/engine/core/arrivals.py)
    background_yielding: int = 0  # background workers (embedding) waiting for clients to end
    # Background tasks by kind (app/engine/background_tasks.py): waiting, running, ended.
    background_queued: dict[str, int] = field(default_factory=dict)
    background_running: dict[str, int] = field(default_factory=dict)
    background_completed: dict[str, int] = field(default_factory=dict)
    # The client steps' llama_decode calls and the slots they carried (engine/decode_counts.py)
    n_decode: int = 0
    n_busy_slots: int = 0
    n_draft_steps: int = 0


BACKGROUND_HELP = "prefill: a ready document's prefix; chunk_kv: a chunk's own KV for blend"


class _EngineCollector(Collector):
    """Reads the engine at scrape time, so the gauges are never stale between requests."""

    def __init__(self, state: Callable[[], EngineGauges]) -> None:
        self._state = state

    def _families(
        self, g: EngineGauges | None
    ) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        specs = (
            ("kvchat_slots_total", "Number of slots.", "slots_total"),
            ("kvchat_slots_busy", "Number of requests processing.", "slots_busy"),
            ("kvchat_queue_depth", "Number of requests deferred.", "queue_depth"),
            (
                "kvchat_requests_arriving",
                "Number of generation requests received and not yet queued.",
                "arriving",
            ),
            (
                "kvchat_background_yielding",
                "Number of background workers (document embedding) waiting while client "
                "requests are served.",
                "background_yielding",
            ),
        )
        for name, help_text, attr in specs:
            value = None if g is None else getattr(g, attr)
            yield GaugeMetricFamily(name, help_text, value=value)
        yield from self._background(g)

    @staticmethod
    def _background(
        g: EngineGauges | None,
    ) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        queued = GaugeMetricFamily(
            "kvchat_background_tasks_queued",
            f"Number of background tasks waiting to run, by kind ({BACKGROUND_HELP}).",
            labels=["kind"],
        )
        running = GaugeMetricFamily(
            "kvchat_background_tasks_running",
            f"Number of background tasks holding a slot, by kind ({BACKGROUND_HELP}).",
            labels=["kind"],
        )
        completed = CounterMetricFamily(
            "kvchat_background_tasks_completed",
            "Number of background tasks ended, by kind (prefill, chunk_kv, and compaction: the "
            "KV cells in use packed).",
            labels=["kind"],
        )
        if g is not None:
            for family, counts in (
                (queued, g.background_queued),
                (running, g.background_running),
                (completed, g.background_completed),
            ):
                for kind, n in counts.items():
                    family.add_metric([kind], n)
        yield from (queued, running, completed)

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        # Names only: lets the registry check for duplicates without touching the engine.
        return self._families(None)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        try:
            g = self._state()
        except Exception:
            # A scrape must not fail because the engine is stopping; drop the gauges this once.
            log.warning("could not read engine gauges", exc_info=True)
            return iter(())
        return self._families(g)


class Metrics:
    """Counters and histograms fed by `observe`, engine gauges read at scrape, own registry."""

    def __init__(self, state: Callable[[], EngineGauges]) -> None:
        # Own registry: tests build several apps in one process, and the global one would
        # refuse the second registration of each name.
        self.registry = CollectorRegistry()
        # No `*_created` series (process-wide switch): llama-server has none, and they double
        # the scrape for a timestamp nobody graphs.
        disable_created_metrics()
        r = self.registry
        self.requests = Counter(
            "kvchat_requests",
            "Number of generation requests, by route and how they ended.",
            ["route", "outcome"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            "kvchat_prompt_tokens",
            "Number of prompt tokens processed, cached ones included.",
            registry=r,
        )
        self.cached_tokens = Counter(
            "kvchat_prompt_tokens_cached",
            "Number of prompt tokens reused from the KV cache, by where they came from.",
            ["source"],
            registry=r,
        )
        self.completion_tokens = Counter(
            "kvchat_completion_tokens",
            "Number of generation tokens processed.",
            registry=r,
        )
        self.draft_tokens = Counter(
            "kvchat_draft_tokens",
            "Number of tokens drafted by speculative decoding.",
            registry=r,
        )
        self.draft_tokens_accepted = Counter(
            "kvchat_draft_tokens_accepted",
            "Number of drafted tokens the model agreed with (decoded without a step of their own).",
            registry=r,
        )
        self.ttft = Histogram(
            "kvchat_time_to_first_token_seconds",
            "Time from submission to the first generated token, completed requests.",
            buckets=BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "kvchat_request_duration_seconds",
            "End-to-end request time, completed requests.",
            buckets=BUCKETS,
            registry=r,
        )
        self.cache_op = Histogram(
            "kvchat_cache_op_seconds",
            "Engine-thread time of one KV cache tier operation (every stream waits for it), by "
            "operation (save, restore, compact) and tier (host, disk, kv).",
            ["op", "tier"],
            buckets=OP_BUCKETS,
            registry=r,
        )
        for op, tier in CACHE_OPS:
            self.cache_op.labels(op=op, tier=tier)
        # Pre-create every label value so the series exist at 0 before the first hit:
        # rate() and "moved by n" checks need a starting point.
        for route in ROUTES:
            for outcome in OUTCOMES:
                self.requests.labels(route=route, outcome=outcome)
        for source in SOURCES:
            self.cached_tokens.labels(source=source)
        r.register(_EngineCollector(state))

        def llamacpp_state() -> LlamaCppState:
            g = state()
            return LlamaCppState(
                g.slots_busy, g.queue_depth, g.n_decode, g.n_busy_slots, g.n_draft_steps
            )

        self.llamacpp = LlamaCppMetrics(llamacpp_state)

    def observe(self, o: RequestOutcome) -> None:
        """Count one finished request and write its log line."""
        self.requests.labels(route=o.route, outcome=o.outcome).inc()
        # Tokens count for every outcome: a cancelled request still cost the prefill and the
        # tokens it generated. Latencies only for complete ones, or cancellations skew them.
        self.prompt_tokens.inc(max(o.prompt_tokens, 0))
        self.completion_tokens.inc(max(o.completion_tokens, 0))
        self.draft_tokens.inc(o.draft_tokens)
        self.draft_tokens_accepted.inc(o.draft_tokens_accepted)
        self.llamacpp.observe(o)
        if o.cached_tokens > 0 and o.cache_source in SOURCES:
            self.cached_tokens.labels(source=o.cache_source).inc(o.cached_tokens)
        if o.outcome == "complete":
            self.duration.observe(o.e2e_s)
            if o.ttft_s is not None:
                self.ttft.observe(o.ttft_s)
        if request_log.isEnabledFor(logging.INFO):
            request_log.info(json.dumps({"event": "request", **dataclasses.asdict(o)}))

    def observe_cache_op(self, op: str, tier: str, seconds: float) -> None:
        """One tier operation's engine-thread time (called on the engine thread)."""
        self.cache_op.labels(op=op, tier=tier).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type, for the /metrics response."""
        return generate_latest(self.registry) + self.llamacpp.render().encode(), CONTENT_TYPE_LATEST
