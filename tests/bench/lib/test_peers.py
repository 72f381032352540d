"""bench.lib.peers' profile: one set of flags for every server of a run (a GPU run's `-ngl`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.lib import peers
from bench.workloads import prefix


@pytest.fixture(autouse=True)
def _default_profile():
    saved = peers.PROFILE
    yield
    peers.PROFILE = saved


def test_the_default_profile_is_this_machines_cpu_figures() -> None:
    command = peers.ours("model.gguf").command
    args = command[command.index("model.gguf") - 1 :]
    assert args == ["-m", "model.gguf", "-np", "4", "-c", "8192", "-t", "2"]


def test_a_profile_reaches_both_servers(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.touch()
    peers.configure(
        threads=8, slots=32, ctx_size=65536, common_args=("-ngl", "999"), llama_server=binary
    )
    peers.configure(ours_args=("--embedding-backend", "torch"))  # keeps the earlier changes
    ours = peers.ours("m.gguf").command
    theirs = peers.llama_server("m.gguf").command
    for command in (ours, theirs):
        flags = " ".join(command)
        assert "-np 32 -c 65536 -t 8 -ngl 999" in flags
    assert "--embedding-backend torch" in " ".join(ours)
    assert "--embedding-backend" not in theirs and theirs[0] == str(binary)
    assert peers.make("ours", "m.gguf", slots=2).command.count("-np") == 1


def test_a_missing_llama_server_is_unavailable(tmp_path: Path) -> None:
    peers.configure(llama_server=tmp_path / "nothing")
    with pytest.raises(peers.PeerUnavailable):
        peers.llama_server("m.gguf")


def test_more_clients_add_aggregate_decode_rows_with_targets() -> None:
    plan = prefix.Plan(1, 1, 1, 1, 8, 8, 16, 1, 1, more_clients=(32,))
    names = prefix.throughput_names(plan)
    assert names == ["1 client x 16 tokens", "8 clients x 16 tokens", "32 clients x 16 tokens"]
    assert prefix.several_clients(names) == names[1:]


def test_a_profile_for_a_block_is_undone_after_it() -> None:
    before = peers.PROFILE
    with peers.profiled(ctx_size=16384) as inside:
        assert peers.PROFILE is inside and inside.ctx_size == 16384
    assert peers.PROFILE is before
