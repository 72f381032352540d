"""The server on lower CPU variants than this CPU's best: started with `--cpu-variant x64` (legacy
SSE only: it runs on any x86-64 CPU) and `haswell` (AVX2: the CPU where an AVX-512 build died
with "Illegal instruction"), it says so in /props and in its start log, and its greedy replies are
the best variant's up to a near tie. A variant that is not built stops the start with the reason.

The tolerance, and why: the variants compute the same graph with other kernels (x64's generic
code quantizes activations and sums in another order than the AVX2 and AVX-512 kernels), so a
token's log-probability differs between them: by up to 0.13 nats on these prompts here. Greedy
replies are therefore compared token by token until they part; every token before that must agree
within TOLERANCE nats, and where they part the best variant's own first two choices must be the
two tokens, within twice that (a near tie that the other arithmetic tips the other way)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from mm.ggml_backends import cpu_variants, library_dir

pytestmark = pytest.mark.skipif(
    not cpu_variants(library_dir()), reason="a build without CPU variants (no GGML_BACKEND_DL)"
)

ARGS = ("-np", "1", "-c", "512")
PROMPTS = ("The three longest rivers of Europe are", "def fibonacci(n):")
N_PREDICT = 32
TOLERANCE = 0.25  # nats: about twice the largest difference measured between variants


@dataclass(slots=True)
class Run:
    replies: list[list[dict]]  # per prompt, per token: id, logprob, top_logprobs (2)
    compute: dict
    log: str


def greedy(*args: str) -> Run:
    replies = []
    with ServerProcess(*ARGS, *args) as server:
        for prompt in PROMPTS:
            body = {"prompt": prompt, "n_predict": N_PREDICT, "temperature": 0, "n_probs": 2}
            reply = httpx.post(server.base_url + "/completion", json=body, timeout=120).json()
            replies.append(reply["completion_probabilities"])
        compute = httpx.get(server.base_url + "/props", timeout=10).json()["compute"]
        log = server.log()
    return Run(replies, compute, log)


def assert_same_up_to_a_near_tie(lower: list[dict], best: list[dict]) -> int:
    """How many tokens agree; fails unless they agree as the module's docstring says."""
    for i, (lo, hi) in enumerate(zip(lower, best, strict=False)):
        if lo["id"] != hi["id"]:
            choices = {c["id"]: c["logprob"] for c in hi["top_logprobs"]}
            assert lo["id"] in choices, (i, lo, hi)
            assert hi["logprob"] - choices[lo["id"]] <= 2 * TOLERANCE, (i, lo, hi)
            return i
        assert abs(lo["logprob"] - hi["logprob"]) <= TOLERANCE, (i, lo, hi)
    assert len(lower) == len(best)
    return len(best)


@pytest.fixture(scope="module")
def best() -> Run:
    return greedy()


def test_the_best_variant_is_named_in_props_and_in_the_start_log(best: Run) -> None:
    variant = best.compute["cpu_variant"]
    assert variant in cpu_variants(library_dir())
    assert "AVX2" in best.compute["cpu_features"] or variant == "x64"
    assert best.compute["devices"][0]["type"] == "cpu"
    assert f"compute: CPU variant {variant} (" in best.log


@pytest.mark.parametrize("variant", ["x64", "haswell"])
def test_a_lower_variant_answers_as_the_best_one(best: Run, variant: str) -> None:
    if variant not in cpu_variants(library_dir()):
        pytest.skip(f"{variant} is not built")
    lower = greedy("--cpu-variant", variant)
    assert lower.compute["cpu_variant"] == variant
    assert f"compute: CPU variant {variant} (" in lower.log
    pairs = zip(lower.replies, best.replies, strict=True)
    agreed = [assert_same_up_to_a_near_tie(lo, hi) for lo, hi in pairs]
    assert len(best.replies[0]) == N_PREDICT and agreed[0] > 0  # something was compared


def test_a_variant_that_is_not_built_stops_the_start_with_the_reason() -> None:
    server = ServerProcess(*ARGS, "--cpu-variant", "pentium4")
    with pytest.raises(RuntimeError, match="exited") as failed:
        server.start(timeout=60)
    assert "no CPU variant 'pentium4'" in str(failed.value)
    assert "built: " in str(failed.value)
