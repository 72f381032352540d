"""bench.similar_prompts: its documents, its table and targets (the servers' side is
bench.long_doc_qa's quick run, which starts each server alone the same way)."""

from __future__ import annotations

import random

import httpx

from bench import similar_prompts as sp
from bench.lib import peers
from bench.lib.client import Result


def test_lmcache_documents_share_their_text_and_random_ones_do_not():
    a, b = sp.lmcache_document(0, 50), sp.lmcache_document(1, 50)
    assert a[1:] == b[1:] and a != b
    rnd = random.Random(3)
    x, y = sp.random_document(50, rnd), sp.random_document(50, rnd)
    assert x.split()[0] != y.split()[0] and len(x.split()) == 51


def turn(scale: float) -> dict:
    parts = {row: {"cold": 3.0, "repeat": 0.1, "around_s": 0.01 * scale, "ms_per_token": 3.0}
             for row in (sp.LM_COLD, sp.RND_COLD)}  # fmt: skip
    return {"rows": {row: scale * (i + 1) for i, row in enumerate(sp.ROWS)}, "cpu_s": 30.0,
            "neighbours": [], "cold_parts": parts}  # fmt: skip


def result(ttft: float, timings: dict) -> Result:
    return Result(ttft, ttft + 0.1, "x", 1, None, None, timings)


def test_a_cold_prompts_time_splits_into_compute_and_what_is_around_it():
    cold = [result(3.0, {"prompt_ms": 2980.0, "prompt_n": 900}),
            result(2.0, {"prompt_ms": 1960.0, "prompt_n": 490})]  # fmt: skip
    parts = sp.OneAtATime.of(cold, [result(0.01, {}), result(0.03, {})])
    assert (parts.cold, parts.repeat) == (2.5, 0.02)
    assert round(parts.around_s, 3) == 0.03 and round(parts.ms_per_token, 3) == round(
        (2980 / 900 + 1960 / 490) / 2, 3
    )
    untimed = sp.OneAtATime.of([result(3.0, {})], [result(0.01, {})])
    assert untimed.around_s is None and untimed.ms_per_token is None


def test_every_row_is_held_to_llama_servers_mean_and_each_run_shows_its_ratio():
    servers = {"ours": [turn(1.0), turn(1.2)], "llama-server": [turn(1.0), turn(1.0)]}
    report = {"plan": sp.QUICK.__dict__, "servers": servers, "failed": {}}
    report["means"] = {n: sp.means(t) for n, t in servers.items()}
    rows = sp.targets(report)
    assert [name for name, *_ in rows] == [f"mean TTFT: {r}" for r in sp.ROWS]
    assert {round(r, 2) for _, r, _, _ in rows} == {1.1} and rows[0][3] == "not met"
    table = sp.markdown(report)
    assert f"- {sp.WARM_UP}: 1.00, 1.20" in table
    assert "- ours: CPU seconds of its turns: 30, 30" in table and "running: none" in table
    line = f"- {sp.RND_COLD}: ours 11 ms around, 3.00 ms a prompt token; llama-server 10 ms"
    assert line in table


def test_other_servers_names_a_running_server_but_not_the_excluded_one():
    with peers.ours(sp_model(), slots=1).process as server:
        assert server.proc is not None
        pid = server.proc.pid
        assert any(line.startswith(f"{pid}:") for line in peers.other_servers())
        assert not any(line.startswith(f"{pid}:") for line in peers.other_servers({pid}))
        assert (server.cpu_seconds() or 0) > 0
        server.pause()  # bench.cold_interleaved freezes the server it does not time
        assert server.state() == "T"  # stopped when pause returns
        server.resume()
        assert server.state() not in ("T", "")
        assert httpx.get(server.base_url + "/health", timeout=30).status_code == 200
        server.pause()  # stop() lets a frozen server go first
    assert server.cpu_seconds() is None


def sp_model() -> str:
    from app.config_derived import packaged_model_path

    return packaged_model_path()
