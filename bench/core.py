"""Serving-core scenarios (issue 2): warm/cold TTFT and batched decode throughput.

Every ratio compares two measurements taken in the same run on the same server: "cold" is the
same prompt with cache_prompt=false (nothing reused), "warm" is the request that can reuse.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from bench.client import Result, stream_chat

TOPICS = [
    "rivers",
    "mountains",
    "markets",
    "libraries",
    "harbours",
    "orchards",
    "bridges",
    "railways",
    "festivals",
    "workshops",
    "gardens",
    "observatories",
]


def long_document(n_paragraphs: int, seed: str) -> str:
    """About 80 tokens a paragraph, unique per seed so no run starts warm by accident."""
    out = [f"Document {seed}."]
    for i in range(n_paragraphs):
        topic = TOPICS[i % len(TOPICS)]
        out.append(
            f"Section {i + 1} describes the {topic} of the region. In year {1900 + 7 * i} the "
            f"council counted {13 * i + 5} {topic}, of which {i + 2} were rebuilt after the "
            f"flood. Visitors remember the {topic} for their colour, their age and the stories "
            f"that the older residents still tell about them on long winter evenings."
        )
    return " ".join(out)


def cold(base_url: str, messages: list[dict], **kw) -> Result:
    return stream_chat(base_url, messages, cache_prompt=False, **kw)


def same_prompt_twice(base_url: str) -> list[tuple[str, Result, Result]]:
    doc = long_document(16, uuid.uuid4().hex[:8])
    messages = [
        {"role": "system", "content": doc},
        {"role": "user", "content": "Summarise section 3 in one sentence."},
    ]
    first = stream_chat(base_url, messages)
    second = stream_chat(base_url, messages)
    return [("same ~1000-token prompt twice", second, first)]


def four_turn_chat(base_url: str) -> list[tuple[str, Result, Result]]:
    doc = long_document(6, uuid.uuid4().hex[:8])
    questions = [
        "What does section 1 describe?",
        "And section 2?",
        "Which year is in section 3?",
        "Thank you. Anything else?",
    ]
    messages = [{"role": "system", "content": doc}]
    rows = []
    for turn, question in enumerate(questions, start=1):
        messages.append({"role": "user", "content": question})
        warm = stream_chat(base_url, messages, max_tokens=24)
        # The cold reference runs after the warm request, so it cannot leave a copy of this
        # exact prompt for the warm one to find; it lands on the least recently used slot.
        reference = cold(base_url, messages, max_tokens=24)
        if turn > 1:
            rows.append((f"4-turn chat, turn {turn}", warm, reference))
        messages.append({"role": "assistant", "content": warm.text})
    return rows


def decode_throughput(base_url: str, n_streams: int, n_tokens: int = 128) -> float:
    """Aggregate generated tokens per second with n concurrent streams."""

    def one(i: int) -> Result:
        return stream_chat(
            base_url,
            [{"role": "user", "content": f"Story number {i}:"}],
            max_tokens=n_tokens,
            ignore_eos=True,
            cache_prompt=False,
        )

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_streams) as pool:
        results = list(pool.map(one, range(n_streams)))
    wall = time.perf_counter() - t0
    return sum(r.completion_tokens for r in results) / wall


FOUR_USERS = [
    "Summarise section 2.",
    "Which year is in section 4?",
    "What about bridges?",
    "Name one topic.",
]


def four_users_at_once(base_url: str, precached: bool) -> list[tuple[str, Result, Result]]:
    """4 users at once on one ~1,200-token system prompt; warm is the slowest of the four, cold
    one such request with nothing reused.

    precached: one earlier request cached the prompt (llama-server, -np 4, served this with one
    hit and three recomputes: 2.4x the cold TTFT). Otherwise nothing is cached: one request
    computes the prompt, the other three wait for it and share it.
    """
    system = long_document(15, uuid.uuid4().hex[:8])

    def conversation(question: str) -> list[dict]:
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]

    reference = cold(base_url, conversation("What is this document?"), max_tokens=4)
    if precached:
        stream_chat(base_url, conversation("What is this document?"), max_tokens=4)
    else:
        system = long_document(15, uuid.uuid4().hex[:8])  # a prompt nobody has cached
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda q: stream_chat(base_url, conversation(q), max_tokens=4), FOUR_USERS)
        )
    name = "4 users at once, " + ("shared system" if precached else "nothing cached")
    return [(name, max(results, key=lambda r: r.ttft), reference)]


def eight_sessions_three_turns(base_url: str) -> list[tuple[str, Result, Result]]:
    """8 conversations taking turns on a 4-slot server: half lose their slot between turns.

    Per warm turn: mean TTFT of the 8 warm requests against the mean of the same prompts sent
    cold (each cold one right after its warm one, so it cannot help it).
    """
    chats = [
        [{"role": "system", "content": long_document(4, uuid.uuid4().hex[:8])}] for _ in range(8)
    ]
    rows = []
    for turn, question in enumerate(
        ["What is section 1 about?", "And section 2?", "Which year is in section 3?"], start=1
    ):
        warm_results, cold_results = [], []
        for messages in chats:
            messages.append({"role": "user", "content": question})
            warm = stream_chat(base_url, messages, max_tokens=16)
            cold_results.append(cold(base_url, messages, max_tokens=16))
            warm_results.append(warm)
            messages.append({"role": "assistant", "content": warm.text})
        if turn > 1:
            rows.append(
                (f"8 sessions on 4 slots, turn {turn}", _mean(warm_results), _mean(cold_results))
            )
    return rows


def _mean(results: list[Result]) -> Result:
    n = len(results)
    return Result(
        sum(r.ttft for r in results) / n,
        sum(r.total for r in results) / n,
        "",
        sum(r.completion_tokens for r in results) // n,
        sum(r.prompt_tokens for r in results) // n,
        sum(r.cached_tokens for r in results) // n,
    )
