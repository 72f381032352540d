"""bench.workloads.cluster_setups' pieces that need no replica: the round-robin variant of
deploy/nginx.conf (accepted by nginx), replicas without the shared tier, and what is read back
from the shared tier's journals and the replicas' request logs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.cache import state_file
from app.cluster.cluster import Layout
from app.cluster.nginx import Nginx, find_nginx
from bench.workloads.cluster_setups import (
    HASH_LINE,
    RoundRobinCluster,
    RoundRobinNginx,
    cache_sources,
    counter_delta,
    tier_stats,
)
from mm.token_sequence import TokenSequence


def test_the_round_robin_configuration_is_the_production_one_without_its_hash(tmp_path: Path):
    args = ("127.0.0.1:9000", ["127.0.0.1:9001", "127.0.0.1:9002"], 1 << 20, tmp_path)
    hashed, plain = Nginx(*args).config(), RoundRobinNginx(*args).config()
    assert HASH_LINE in hashed and HASH_LINE not in plain
    assert [ln for ln in hashed.splitlines() if HASH_LINE not in ln] == [
        ln for ln in plain.splitlines() if "round-robin (bench.cluster)" not in ln
    ]
    binary = find_nginx()
    if binary is None:
        pytest.fail("nginx not found: scripts/nginx.sh installs it (make test runs it)")
    conf = tmp_path / "nginx.conf"
    conf.write_text(plain)
    checked = subprocess.run(
        [binary, "-t", "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(conf)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


def test_without_the_shared_tier_replicas_get_no_cache_dir(tmp_path: Path):
    layout = Layout(9000, 2, tmp_path, "postgresql://x/y", ["-np", "2"])
    shared = RoundRobinCluster(layout, shared=True)
    private = RoundRobinCluster(layout, shared=False)
    assert isinstance(private.nginx, RoundRobinNginx)
    for with_tier, without in zip(shared.replicas, private.replicas, strict=True):
        i = with_tier.command.index("--cache-dir")
        assert with_tier.command[i + 1] == str(shared.cache_dir)
        assert "--cache-shared" in with_tier.command
        expected = [a for a in with_tier.command if a not in ("--cache-dir", "--cache-shared")]
        expected.remove(str(shared.cache_dir))
        assert without.command == expected
        assert without.command[-2:] == ["-np", "2"]


def entry(path: Path, model: str, n_tokens: int, data: bytes) -> int:
    """A state file as the disk tier writes it; its size."""
    header = state_file.encode_header("", TokenSequence(list(range(n_tokens))), data, model)
    return state_file.write(path, state_file.header_bytes(header), data)


def test_tier_stats_count_entries_tokens_and_journal_lines(tmp_path: Path, model_path: str):
    model = state_file.cached_fingerprint(model_path)
    size = entry(tmp_path / "a.kvstate", model, 3, b"x" * 300)
    size += entry(tmp_path / "b.kvstate", model, 5, b"y" * 500)
    entry(tmp_path / "other.kvstate", "another model", 7, b"z" * 700)  # never indexed
    journal = tmp_path / "journal"
    journal.mkdir()
    (journal / "replica-1.log").write_text("+ a.kvstate\n+ b.kvstate\n- c.kvstate\n")
    (journal / "replica-2.log").write_text("+ d.kvstate\n")
    (tmp_path / "trash").mkdir()
    (tmp_path / "trash" / "c.kvstate").write_bytes(b"x")
    stats = tier_stats(tmp_path, model_path)
    assert (stats["files"], stats["tokens"], stats["bytes"]) == (2, 8, size)
    assert stats["bytes_per_token"] == size / 8
    assert (stats["journal_added"], stats["journal_removed"], stats["trash_files"]) == (3, 1, 1)
    assert stats["journal_bytes"] == 48
    empty = tier_stats(tmp_path / "none", model_path)
    assert (empty["files"], empty["bytes_per_token"], empty["journal_added"]) == (0, None, 0)


def test_cached_tokens_are_summed_by_tier_from_the_request_logs(tmp_path: Path):
    layout = Layout(9000, 2, tmp_path, "postgresql://x/y")
    cluster = RoundRobinCluster(layout, shared=True)
    line = 'INFO kvchat.requests: {{"event": "request", "cached_tokens": {}, "cache_source": "{}"}}'
    one, two = cluster.replicas
    one.log_path.write_text("\n".join([line.format(10, "host"), line.format(0, "none")]))
    two.log_path.write_text("\n".join([line.format(5, "host"), "noise", line.format(7, "disk")]))
    assert cache_sources(cluster) == {"host": 15, "disk": 7}


def test_counter_deltas_leave_the_connection_count_out():
    before = {"numbackends": 3, "xact_commit": 10, "tup_inserted": 1}
    after = {"numbackends": 5, "xact_commit": 25, "tup_inserted": 4}
    assert counter_delta(before, after) == {"xact_commit": 15, "tup_inserted": 3}
