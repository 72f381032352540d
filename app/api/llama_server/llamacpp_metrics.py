"""llama-server's `llamacpp:*` series beside ours, for dashboards built on llama-server.

Same names, types, help, order and text as llama-server's /metrics (one `# HELP`, `# TYPE` and
sample line each, no labels): prompt tokens are those computed, cached ones counted apart;
seconds are the engine's prompt and generation times; generation rates count decode steps, one
fewer than a request's tokens (its first comes from the prompt's last batch). The two rate gauges
cover what ended since the last scrape, as llama-server's "buckets" do: a scrape reads and
empties them (an idle or sleeping server then reports 0). The engine's
counts (llama_decode calls, busy slots, requests) are read at scrape time. Our own `kvchat_*`
series say more (cached tokens by tier, latency histograms) and stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.api.outcome import RequestOutcome


@dataclass(slots=True)
class LlamaCppState:
    """What the engine says at scrape time."""

    processing: int  # requests in slots
    deferred: int  # requests waiting for one
    n_decode: int  # llama_decode calls that carried clients' tokens
    n_busy_slots: int  # summed over those calls
    n_draft_steps: int  # slot-steps that verified drafts


@dataclass(slots=True)
class _Totals:
    prompt_tokens: int = 0  # computed, not from a cache
    prompt_cached: int = 0
    prompt_seconds: float = 0.0
    predicted_tokens: int = 0
    predicted_seconds: float = 0.0
    n_tokens_max: int = 0  # the longest sequence, prompt and reply
    draft_tokens: int = 0
    draft_accepted: int = 0


@dataclass(slots=True)
class _Bucket:
    """What the rate gauges read: the requests ended since the last scrape."""

    prompt_tokens: int = 0
    prompt_seconds: float = 0.0
    predicted_steps: int = 0  # decode steps of the tokens: each request's first is free
    predicted_seconds: float = 0.0


class LlamaCppMetrics:
    def __init__(self, state: Callable[[], LlamaCppState]) -> None:
        self._state = state
        self._t = _Totals()
        self._bucket = _Bucket()

    def observe(self, o: RequestOutcome) -> None:
        b = self._bucket
        b.prompt_tokens += max(o.prompt_tokens - o.cached_tokens, 0)
        b.prompt_seconds += max(o.prompt_ms, 0.0) / 1000.0
        b.predicted_steps += max(o.completion_tokens - 1, 0)
        b.predicted_seconds += max(o.predicted_ms, 0.0) / 1000.0
        t = self._t
        t.prompt_tokens += max(o.prompt_tokens - o.cached_tokens, 0)
        t.prompt_cached += max(o.cached_tokens, 0)
        t.prompt_seconds += max(o.prompt_ms, 0.0) / 1000.0
        t.predicted_tokens += max(o.completion_tokens, 0)
        t.predicted_seconds += max(o.predicted_ms, 0.0) / 1000.0
        t.n_tokens_max = max(t.n_tokens_max, o.prompt_tokens + o.completion_tokens)
        t.draft_tokens += o.draft_tokens
        t.draft_accepted += o.draft_tokens_accepted

    def render(self) -> str:
        """llama-server's text: its counters, then its gauges (none while the engine stops);
        empties the rate bucket."""
        t, b = self._t, self._bucket
        self._bucket = _Bucket()
        try:
            s: LlamaCppState | None = self._state()
        except Exception:  # the engine is stopping: its counts are left out this scrape
            s = None
        counters = [
            ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
             t.prompt_tokens),
            ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
             t.prompt_cached),
            ("prompt_seconds_total", "Total time spent processing prompts", t.prompt_seconds),
            ("tokens_predicted_total", "Number of generation tokens processed",
             t.predicted_tokens),
            ("tokens_predicted_seconds_total", "Total time spent generating tokens",
             t.predicted_seconds),
            ("n_decode_total", "Total number of llama_decode() calls, excluding speculative "
             "decoding and multimodal decoding", s and s.n_decode),
            ("n_tokens_max", "Largest observed sequence length (prompt + generation)",
             t.n_tokens_max),
            ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated",
             t.draft_tokens),
            ("spec_decode_num_accepted_tokens_total",
             "Speculative: Total draft tokens accepted by the target model", t.draft_accepted),
            ("spec_decode_num_drafts_total",
             "Speculative: Total speculative decoding verification steps",
             s and s.n_draft_steps),
        ]  # fmt: skip
        gauges = [
            ("prompt_tokens_seconds", "Average prompt throughput in tokens/s",
             _rate(b.prompt_tokens, b.prompt_seconds)),
            ("predicted_tokens_seconds", "Average generation throughput in tokens/s",
             _rate(b.predicted_steps, b.predicted_seconds)),
            ("requests_processing", "Number of requests processing", s and s.processing),
            ("requests_deferred", "Number of requests deferred", s and s.deferred),
            ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
             s and s.n_busy_slots / max(s.n_decode, 1)),
        ]  # fmt: skip
        lines = [
            line
            for kind, items in (("counter", counters), ("gauge", gauges))
            for name, help_text, value in items
            if value is not None
            for line in (
                f"# HELP llamacpp:{name} {help_text}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{name} {value}",
            )
        ]
        return "".join(line + "\n" for line in lines)


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else 0.0
