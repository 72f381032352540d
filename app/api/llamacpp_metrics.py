"""llama-server's `llamacpp:*` series beside ours, for dashboards built on llama-server.

Same names, types and meanings as llama-server's /metrics: prompt tokens are those computed
(not taken from a cache), seconds are the engine's prompt and generation times; the gauges are
read from the engine at scrape time. Our own `kvchat_*` series say more (cached tokens by tier,
latency histograms) and stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.api.outcome import RequestOutcome


class LlamaCppMetrics:
    def __init__(
        self, registry: CollectorRegistry, busy_and_deferred: Callable[[], tuple[int, int]]
    ) -> None:
        def counter(name: str, help_text: str) -> Counter:
            return Counter(f"llamacpp:{name}", help_text, registry=registry)

        self.prompt_tokens = counter("prompt_tokens", "Number of prompt tokens processed.")
        self.prompt_seconds = counter("prompt_seconds", "Prompt process time")
        self.tokens_predicted = counter(
            "tokens_predicted", "Number of generation tokens processed."
        )
        self.predicted_seconds = counter("tokens_predicted_seconds", "Predict process time")
        registry.register(_Gauges(self, busy_and_deferred))

    def observe(self, o: RequestOutcome) -> None:
        self.prompt_tokens.inc(max(o.prompt_tokens - o.cached_tokens, 0))
        self.prompt_seconds.inc(max(o.prompt_ms, 0.0) / 1000.0)
        self.tokens_predicted.inc(max(o.completion_tokens, 0))
        self.predicted_seconds.inc(max(o.predicted_ms, 0.0) / 1000.0)


class _Gauges(Collector):
    """Throughputs since start, and the slots busy and requests waiting now."""

    def __init__(
        self, m: LlamaCppMetrics, busy_and_deferred: Callable[[], tuple[int, int]]
    ) -> None:
        self._m, self._state = m, busy_and_deferred

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return self._families(None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            state = self._state()
        except Exception:  # the engine is stopping: no gauges this scrape
            return iter(())
        return self._families(state)

    def _families(self, state: tuple[int, int] | None) -> Iterator[GaugeMetricFamily]:
        m = self._m

        def rate(tokens: Counter, seconds: Counter) -> float:
            s = seconds._value.get()  # noqa: SLF001 (prometheus_client has no public read)
            return tokens._value.get() / s if s > 0 else 0.0  # noqa: SLF001

        values = (
            ("prompt_tokens_seconds", "Average prompt throughput in tokens/s.",
             rate(m.prompt_tokens, m.prompt_seconds)),
            ("predicted_tokens_seconds", "Average generation throughput in tokens/s.",
             rate(m.tokens_predicted, m.predicted_seconds)),
            ("requests_processing", "Number of requests processing.",
             state[0] if state else None),
            ("requests_deferred", "Number of requests deferred.", state[1] if state else None),
        )  # fmt: skip
        for name, help_text, value in values:
            yield GaugeMetricFamily(f"llamacpp:{name}", help_text, value=value)
