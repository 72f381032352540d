"""Two real replicas behind nginx on a fresh PostgreSQL database, on 127.0.0.1 high ports,
sharing a KV tier: `app.cluster.Cluster`, as `make cluster` runs it.

PostgreSQL comes from KVCHAT_TEST_POSTGRES_URL (`make test` starts one; without it these tests
are skipped, like every PostgreSQL test). nginx is required: `make test` installs it
(scripts/nginx.sh), so a missing nginx fails the tests instead of skipping them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cluster.cluster import Cluster, Layout
from app.cluster.nginx import find_nginx
from tests.db_urls import fresh_database_url

# Small and few slots: the machine running the tests is shared.
REPLICA_ARGS = ["--parallel", "2", "--ctx-size", "4096", "--threads", "1", "--no-warmup"]
# A killed replica's hold on an Idempotency-Key runs out this soon: nginx's retry of its turn
# waits that long on the next replica.
REPLICA_ARGS += ["--idempotency-lease", "3"]


def free_port_run(n: int) -> int:
    """A port P with P..P+n-1 free on 127.0.0.1 now (nginx on P, replicas above it)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        if all(_free(base + i) for i in range(1, n)):
            return base
    raise RuntimeError(f"no run of {n} free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if find_nginx() is None:
        pytest.fail("nginx not found: scripts/nginx.sh installs it (make test runs it)")
    work: Path = tmp_path_factory.mktemp("cluster")
    with fresh_database_url("postgresql", work) as url:
        layout = Layout(free_port_run(3), 2, work, url, REPLICA_ARGS)
        running = Cluster(layout)
        try:
            running.start()
            yield running
        finally:
            running.stop()
