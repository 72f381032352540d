"""One request may use only its share of the shared KV (llama-server's per-slot n_ctx), so a
long generation cannot evict the other slots' caches."""

from __future__ import annotations

import httpx

from bench.lib.server_process import ServerProcess


def test_a_request_without_max_tokens_stops_at_its_kv_share_and_others_keep_their_cache():
    # 256 cells, 2 slots: 128 per request. Idle slots stay resident (not parked in host
    # memory), so slot 0's cells are there for the long request to evict if it could.
    with ServerProcess("-np", "2", "-c", "256", "--no-cache-idle-slots") as server:
        url = server.base_url
        kept = httpx.post(
            f"{url}/v1/completions",
            json={"prompt": "The capital of France is", "max_tokens": 2, "id_slot": 0},
            timeout=60,
        ).json()
        n_kept = httpx.get(f"{url}/slots").json()[0]["n_cached"]
        assert n_kept >= kept["usage"]["prompt_tokens"]
        body = {"prompt": "Once upon a time", "ignore_eos": True, "id_slot": 1}
        long = httpx.post(f"{url}/v1/completions", json=body, timeout=300).json()
        usage = long["usage"]
        assert long["choices"][0]["finish_reason"] == "length"
        assert usage["prompt_tokens"] + usage["completion_tokens"] <= 128
        assert httpx.get(f"{url}/slots").json()[0]["n_cached"] == n_kept
        too_long = httpx.post(f"{url}/v1/completions", json={"prompt": "go " * 200}, timeout=60)
        assert too_long.status_code == 400
        assert too_long.json()["error"]["code"] == "exceed_context_size_error"
