"""bench.long_doc_qa: its workload, its table and targets, and a --quick run of ours."""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench import long_doc_qa
from bench.lib import report as compare_report
from bench.long_doc_qa import COLD, FULL, LM_COLD, LM_WARM, QUICK, WARM


def test_lmcache_documents_share_all_but_their_number():
    texts = [m[0]["content"] for m in long_doc_qa.prompts(FULL, random.Random(1), "lmcache")]
    assert texts[0].startswith("0hi hi") and texts[3].startswith("3hi hi")
    assert len({t[1:] for t in texts}) == 1 and len(texts[0].split()) == FULL.words


def test_every_prompt_is_a_fresh_document_and_the_question():
    batch = long_doc_qa.prompts(FULL, random.Random(1))
    assert len(batch) == FULL.documents
    texts = [m[0]["content"] for m in batch]
    assert all(t.endswith(long_doc_qa.QUESTION) for t in texts)
    # A unique tag opens every document: no server holds any of it before round 1.
    assert len({t.split("\n")[0] for t in texts}) == FULL.documents
    assert all(len(t.split()) > FULL.words for t in texts)


def report(ours: tuple[float, float], peer: tuple[float, float]) -> dict:
    def server(cold: float, warm: float) -> dict:
        rounds = {COLD: cold, WARM: warm, LM_COLD: cold, LM_WARM: warm}
        turns = [{"kind": "random", "cpu_s": 12.0, "other_servers": []}]
        return rounds | {"runs": {}, "prompt_tokens": 800.0, "turns": turns}

    return {
        "plan": QUICK.__dict__,
        "servers": {"ours": server(*ours), "llama-server": server(*peer)},
        "failed": {},
    }


def test_targets_hold_each_round_to_llama_servers_mean_ttft():
    rows = long_doc_qa.targets(report((1.0, 0.1), (1.25, 0.4)))
    assert [(name.split(": ")[-1], round(r, 2), v) for name, r, _, v in rows] == [
        (COLD, 0.8, "met"),
        (WARM, 0.25, "met"),
        (LM_COLD, 0.8, "met"),
        (LM_WARM, 0.25, "met"),
    ]
    rows = long_doc_qa.targets(report((1.5, 0.1), (1.0, 0.4)))
    assert [v for *_, v in rows] == ["not met", "met", "not met", "met"]
    table = long_doc_qa.markdown(report((1.5, 0.1), (1.0, 0.4)))
    assert f"| {COLD} | 1.500 | 1.000 | 1.50 |" in table and "~800-token prompts" in table
    assert f"| {LM_COLD} | 1.500 | 1.000 | 1.50 |" in table
    assert "- ours: CPU seconds per turn: 12; other servers: none" in table
    # Without llama-server there is nothing to hold ours to.
    alone = report((1.0, 0.1), (1.0, 0.1))
    del alone["servers"]["llama-server"]
    assert long_doc_qa.targets(alone) == []


def test_quick_run_of_ours(tmp_path: Path):
    args = ["--quick", "--servers", "ours", "--out", str(tmp_path)]
    assert long_doc_qa.main(args) == 0
    ours = json.loads((tmp_path / "long-doc-qa-quick.json").read_text())["servers"]["ours"]
    assert ours[COLD] > 0 and ours[WARM] > 0 and ours["prompt_tokens"] > QUICK.words
    # Round 2 repeats round 1's prompts: nearly all of each is served from cache.
    assert ours["cached_share_warm"] > 0.9
    table = (tmp_path / "long-doc-qa-quick.md").read_text()
    assert "| round 1 (cold) |" in table and f"| {LM_WARM} |" in table
    assert ours["turns"] and all(t["cpu_s"] > 0 for t in ours["turns"])


def test_a_compare_report_lists_every_round_in_its_tables_targets_and_headline():
    from tests.bench.lib.test_report import full_report

    r = full_report()
    r["long_doc_qa"] = report((1.0, 0.1), (1.25, 0.4))
    names = [name for name, *_ in compare_report.targets(r)]
    rounds = (COLD, WARM, LM_COLD, LM_WARM)
    assert names[-4:] == [f"long-document QA, mean TTFT: {k}" for k in rounds]
    assert "Long-document QA" in compare_report.markdown(r)
    head = compare_report.headline(r)
    assert f"| long-document QA, mean TTFT: {COLD} | 1.000 | 1.250 | 0.80 | ≤ 1: met |" in head
