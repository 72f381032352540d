"""Sessions scenario: 8 sessions x 4 turns interleaved on a 4-slot server.

Each turn sends only the new message through the sessions API; half the sessions lose their
slot between turns, so their history must come back from another tier. Per turn it prints the
hit ratio (cached / prompt tokens) and the mean TTFT against the same prompts sent cold
(/v1/chat/completions with cache_prompt=false, right after the warm turn so it cannot help it).
"""

from __future__ import annotations

from bench.lib.client import Result, create_session, stream_session
from bench.lib.core import _mean, cache_off, long_document

QUESTIONS = [
    "What is section 1 about?",
    "And section 2?",
    "Which year is in section 3?",
    "Thank you. Which section did you like best?",
]


def eight_sessions_four_turns(base_url: str) -> list[tuple[str, Result, Result]]:
    systems = [long_document(4) for _ in range(8)]
    sessions = [create_session(base_url, s) for s in systems]
    histories: list[list[dict]] = [[{"role": "system", "content": s}] for s in systems]
    rows = []
    for turn, question in enumerate(QUESTIONS, start=1):
        warm_results, cold_results = [], []
        for sid, history in zip(sessions, histories, strict=True):
            warm = stream_session(base_url, sid, question)
            history += [{"role": "user", "content": question}]
            cold_results.append(cache_off(base_url, history))
            history += [{"role": "assistant", "content": warm.text}]
            warm_results.append(warm)
        warm, cold = _mean(warm_results), _mean(cold_results)
        ratio = sum(r.cached_tokens or 0 for r in warm_results) / sum(
            r.prompt_tokens or 1 for r in warm_results
        )
        rows.append((f"8 sessions API, turn {turn} (hit {ratio:.0%})", warm, cold))
    return rows
