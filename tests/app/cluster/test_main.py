from __future__ import annotations

import pytest

from app.cluster.__main__ import parse


def test_flags_after_the_separator_go_to_every_replica():
    args, replica_args = parse(["--replicas", "3", "--port", "9000", "--", "-np", "4", "--"])
    assert (args.replicas, args.port, args.host, args.work_dir) == (3, 9000, "127.0.0.1", None)
    assert replica_args == ["-np", "4", "--"]
    args, replica_args = parse([])
    assert (args.replicas, args.port, replica_args) == (2, 8080, [])


def test_a_cluster_has_at_least_one_replica():
    with pytest.raises(SystemExit):
        parse(["--replicas", "0"])
