"""bench.speculation's pieces that need no server: the workload, the targets, the table."""

from __future__ import annotations

from bench import speculation
from bench.lib.client import Result

ROWS = {
    "quoting": {"ours": 230.0, "ours-no-spec": 150.0, "llama-server-spec": 200.0},
    "document answers": {"ours": 200.0, "ours-no-spec": 150.0, "llama-server-spec": 190.0},
    speculation.ASKED: {"ours": 200.0, "ours-no-spec": 150.0, "llama-server-spec": 190.0},
    "free text": {"ours": 149.0, "ours-no-spec": 150.0, "llama-server-spec": 150.0},
    "4 busy slots": {"ours": 300.0, "ours-no-spec": 290.0, "llama-server-spec": 280.0},
}


def test_targets_compare_with_the_peer_or_with_ours_without():
    verdicts = {
        name: (ratio, verdict) for name, ratio, _, verdict in speculation.targets({"rows": ROWS})
    }
    quoting = verdicts["speculation: quoting answer, vs llama-server spec"]
    assert quoting == (230.0 / 200.0, "met")
    documents = verdicts["speculation: document answers (ours /ask), vs llama-server spec"]
    assert documents[1] == "not met"  # 1.05 < 1.1
    free = verdicts["speculation: free text, vs ours without (not llama-server)"]
    assert free == (149.0 / 150.0, "met")


def test_markdown_has_a_row_per_scenario():
    text = speculation.markdown({"rows": ROWS})
    assert "| quoting | 230.0 | 150.0 | 200.0 |" in text
    assert text.count("\n|") == len(ROWS) + 2


def test_workload_quotes_documents_and_asks_about_them():
    work = speculation.scenarios(quick=True)
    assert set(work) == {"quoting", "document answers", "free text"}
    assert all("Sources:" in m[0]["content"] for m in work["document answers"])
    assert speculation.speed(Result(1.0, 2.0, "", 101, None, None)) == 100.0


def test_each_request_goes_to_the_servers_in_a_rotated_order():
    order = speculation.SERVERS
    firsts = [speculation.turns(order, i)[0] for i in range(len(order))]
    assert sorted(firsts) == sorted(order)  # each server goes first in turn
    assert all(sorted(speculation.turns(order, i)) == sorted(order) for i in range(5))
