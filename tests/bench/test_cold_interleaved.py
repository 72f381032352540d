"""bench.cold_interleaved: its table and targets (the frozen server and the servers' side are
in test_similar_prompts.py and bench.long_doc_qa's quick run)."""

from __future__ import annotations

from bench import cold_interleaved as ci


def report(ours: list[float], peer: list[float]) -> dict:
    kind = {"ours": {"cold": ours, "repeat": [0.005]}, "llama-server": {"cold": peer,
            "repeat": [0.02]}}  # fmt: skip
    kinds = {k: kind for k in ci.KINDS}
    return {"plan": ci.asdict(ci.QUICK), "runs": [{"kinds": kinds}], "kinds": kinds,
            "idle_cpu_s": 0.0}  # fmt: skip


def test_each_kind_is_held_to_llama_servers_mean_with_the_spread_of_its_documents():
    r = report([3.0, 2.0], [2.5, 2.5])
    rows = ci.targets(r)
    assert [name for name, *_ in rows] == [f"cold TTFT, interleaved: {k}" for k in ci.KINDS]
    assert {verdict for *_, verdict in rows} == {"met"}  # 2.5 against 2.5
    table = ci.markdown(r)
    assert "| random words | 2.500 | 2.500 | 1.00 | 1.00 (0.80-1.20) | 0.005 | 0.020 |" in table
    assert "frozen server over the other's requests: 0.00" in table
    assert "- random words: 1.00" in table
    assert ci.targets(report([3.0, 2.1], [2.5, 2.5]))[0][3] == "not met"


def test_documents_of_each_kind():
    import random

    lm = ci.documents(ci.KINDS[0], ci.QUICK, random.Random(1))
    rnd = ci.documents(ci.KINDS[1], ci.QUICK, random.Random(1))
    assert len(lm) == len(rnd) == ci.QUICK.documents
    assert lm[0][3:] == lm[1][3:] and rnd[0].split()[1:] != rnd[1].split()[1:]
