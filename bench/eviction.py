"""`python -m bench.eviction`: host-cache eviction, LRU against GDSF, on one synthetic trace.

Trace: 6 shared documents (800 tokens, Zipf popularity) asked about between one-off
conversations (300-token prefix, three turns close together). Each request is looked up first
(hit tokens = the longest cached prefix) and then stored, as the engine stores a slot's KV when
the slot is taken. Bytes are proportional to tokens, as for one model. Prints the share of
prompt tokens served from the cache for several budgets.
"""

from __future__ import annotations

import random

from app.cache.host_cache import HostCache
from mm.token_sequence import TokenSequence


def trace(seed: int = 7, n: int = 600) -> list[TokenSequence]:
    rng = random.Random(seed)
    docs = [[1000 * (d + 1) + i for i in range(800)] for d in range(6)]
    weights = [1 / (k + 1) for k in range(6)]
    requests: list[TokenSequence] = []
    next_token = 10**6
    while len(requests) < n:
        if rng.random() < 0.5:
            doc = rng.choices(docs, weights)[0]
            question = [next_token + i for i in range(20)]
            next_token += 20
            requests.append(TokenSequence(doc + question))
        else:
            base = [next_token + i for i in range(300)]
            next_token += 300
            for turn in range(3):
                requests.append(TokenSequence(base + list(range(5, 5 + 30 * (turn + 1)))))
    return requests[:n]


def hit_ratio(policy: str, budget_tokens: int, requests: list[TokenSequence]) -> float:
    cache = HostCache(budget_bytes=budget_tokens, policy=policy)
    hit = total = 0
    for prompt in requests:
        found = cache.best("", prompt)
        if found:
            cache.touch(found[0])
            hit += found[1]
        total += len(prompt)
        cache.store("", prompt, b"x" * len(prompt))
    return hit / total


def main() -> None:
    requests = trace()
    print(f"{'budget (tokens)':>16} {'LRU':>7} {'GDSF':>7}")
    for budget in (1000, 2000, 4000, 8000):
        print(
            f"{budget:16d} {hit_ratio('lru', budget, requests):7.3f} "
            f"{hit_ratio('gdsf', budget, requests):7.3f}"
        )


if __name__ == "__main__":
    main()
