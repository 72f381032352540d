"""Prefix-reuse scenarios for any OpenAI-compatible server, and batched decode throughput.

Each scenario returns rows (name, warm, cold): "warm" is the request that can reuse what an
earlier one left, "cold" a reference measured in the same run right next to it with nothing
reused. How the cold reference is made is a parameter, `cold`:
- `cache_off` (`python -m bench`, our server): the same prompt with `cache_prompt: false`;
- `fresh_prefix` (`python -m bench.compare`, any server): the same prompt with a unique nonce
  at the very start (a few tokens longer), so no server can reuse any of it. llama-cpp-python's
  server has no `cache_prompt` field, so the comparison uses this for every server.
Documents are fresh random text on every call, so no scenario starts warm by accident.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from bench.lib.client import Result, stream_chat

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

Row = tuple[str, Result, Result]
# cold(base_url, messages, **stream_chat keywords) -> the reference with nothing reused
Cold = Callable[..., Result]


def nonce() -> str:
    return uuid.uuid4().hex[:8]


def long_document(n_paragraphs: int, seed: str | None = None) -> str:
    """About 65 tokens a paragraph, unique per seed so no run starts warm by accident."""
    out = [f"Document {seed or nonce()}."]
    for i in range(n_paragraphs):
        topic = TOPICS[i % len(TOPICS)]
        out.append(
            f"Section {i + 1} describes the {topic} of the region. In year {1900 + 7 * i} the "
            f"council counted {13 * i + 5} {topic}, of which {i + 2} were rebuilt after the "
            f"flood. Visitors remember the {topic} for their colour, their age and the stories "
            f"that the older residents still tell about them on long winter evenings."
        )
    return " ".join(out)


def cache_off(base_url: str, messages: list[dict], **kw) -> Result:
    """Cold reference on servers with llama-server's `cache_prompt` field."""
    return stream_chat(base_url, messages, cache_prompt=False, **kw)


def fresh_prefix(base_url: str, messages: list[dict], **kw) -> Result:
    """Cold reference on any server: a unique nonce before everything else in the prompt."""
    tag = f"[{nonce()}] "
    first, *rest = messages
    content = first["content"]
    if isinstance(content, str):
        content = tag + content
    else:
        content = [{"type": "text", "text": tag}, *content]
    return stream_chat(base_url, [{**first, "content": content}, *rest], **kw)


def same_prompt_twice(base_url: str, cold: Cold = cache_off, paragraphs: int = 16) -> list[Row]:
    """A ~1,000-token prompt (a fresh document) sent twice; cold right after the second."""
    messages = [
        {"role": "system", "content": long_document(paragraphs)},
        {"role": "user", "content": "Summarise section 3 in one sentence."},
    ]
    stream_chat(base_url, messages)
    warm = stream_chat(base_url, messages)
    return [("same long prompt twice", warm, cold(base_url, messages))]


def growing_prefix(
    base_url: str, cold: Cold = cache_off, paragraphs: int = 16, rounds: int = 3
) -> list[Row]:
    """A ~1,000-token prompt, then rounds that each add a few tokens at its end."""
    doc = long_document(paragraphs)
    notes = "Notes so far:"

    def messages() -> list[dict]:
        return [{"role": "system", "content": doc}, {"role": "user", "content": notes}]

    stream_chat(base_url, messages(), max_tokens=4)
    rows = []
    for n in range(1, rounds + 1):
        notes += f" {TOPICS[n]} matter."
        warm = stream_chat(base_url, messages(), max_tokens=4)
        # After the warm request, so it cannot leave a copy of this exact prompt for it.
        rows.append((f"growing prefix, round {n}", warm, cold(base_url, messages(), max_tokens=4)))
    return rows


def four_turn_chat(base_url: str, cold: Cold = cache_off, paragraphs: int = 6) -> list[Row]:
    doc = long_document(paragraphs)
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


def decode_throughput(
    base_url: str, n_streams: int, n_tokens: int = 128, **extra
) -> tuple[float, list[Result]]:
    """Aggregate generated tokens per second with n concurrent streams, and their results.

    extra: what makes the server ignore end-of-generation (`ignore_eos`, `logit_bias`).
    """
    tag = nonce()

    def one(i: int) -> Result:
        return stream_chat(
            base_url,
            [{"role": "user", "content": f"Story number {i} ({tag}):"}],
            max_tokens=n_tokens,
            **{"ignore_eos": True, **extra},
        )

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_streams) as pool:
        results = list(pool.map(one, range(n_streams)))
    wall = time.perf_counter() - t0
    return sum(r.completion_tokens for r in results) / wall, results


FOUR_USERS = [
    "Summarise section 2.",
    "Which year is in section 4?",
    "What about bridges?",
    "Name one topic.",
]


def _shared(system: str, question: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def shared_system_in_turn(base_url: str, cold: Cold = cache_off, paragraphs: int = 18) -> list[Row]:
    """4 users one after another on one ~1,200-token system prompt: users 2-4 can reuse it."""
    system = long_document(paragraphs)
    stream_chat(base_url, _shared(system, FOUR_USERS[0]), max_tokens=4)
    rows = []
    for n, question in enumerate(FOUR_USERS[1:], start=2):
        warm = stream_chat(base_url, _shared(system, question), max_tokens=4)
        reference = cold(base_url, _shared(system, question), max_tokens=4)
        rows.append((f"shared system, user {n} of 4 in turn", warm, reference))
    return rows


def four_users_at_once(
    base_url: str, precached: bool, cold: Cold = cache_off, paragraphs: int = 18
) -> list[Row]:
    """4 users at once on one ~1,200-token system prompt; warm is the slowest of the four, cold
    one such request with nothing reused.

    precached: one earlier request cached the prompt (llama-server, -np 4, served this with one
    hit and three recomputes: 2.4x the cold TTFT). Otherwise nothing is cached: one request
    computes the prompt, the other three wait for it and share it.
    """
    system = long_document(paragraphs)
    reference = cold(base_url, _shared(system, "What is this document?"), max_tokens=4)
    if precached:
        stream_chat(base_url, _shared(system, "What is this document?"), max_tokens=4)
    else:
        system = long_document(paragraphs)  # a prompt nobody has cached
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda q: stream_chat(base_url, _shared(system, q), max_tokens=4), FOUR_USERS)
        )
    name = "4 users at once, " + ("shared system" if precached else "nothing cached")
    return [(name, max(results, key=lambda r: r.ttft), reference)]


def eight_sessions_three_turns(
    base_url: str, cold: Cold = cache_off, paragraphs: int = 4, n_sessions: int = 8
) -> list[Row]:
    """8 conversations taking turns on a 4-slot server: half lose their slot between turns.

    Per warm turn: mean TTFT of the 8 warm requests against the mean of the same prompts sent
    cold (each cold one right after its warm one, so it cannot help it).
    """
    chats = [[{"role": "system", "content": long_document(paragraphs)}] for _ in range(n_sessions)]
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
                (
                    f"{n_sessions} sessions on 4 slots, turn {turn}",
                    _mean(warm_results),
                    _mean(cold_results),
                )
            )
    return rows


def _mean_of(values: list[int | None]) -> int | None:
    if any(v is None for v in values):
        return None
    return sum(values) // len(values)  # type: ignore[arg-type]


def _mean(results: list[Result]) -> Result:
    n = len(results)
    return Result(
        sum(r.ttft for r in results) / n,
        sum(r.total for r in results) / n,
        "",
        sum(r.completion_tokens for r in results) // n,
        _mean_of([r.prompt_tokens for r in results]),
        _mean_of([r.cached_tokens for r in results]),
    )
