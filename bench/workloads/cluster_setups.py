"""What the cluster bench (bench/cluster.py) runs its workload against, and what it measures
around it: a throwaway PostgreSQL with a fresh database per setup, and app.cluster's `Cluster`
started as

- `single`: one replica, addressed directly (nginx idle in front of it);
- `hash`: replicas behind nginx with deploy/nginx.conf (consistent hash on the session and
  collection ids);
- `round-robin`: the same, with the `hash` line of the configuration dropped (nginx's default
  balancing), generated here: production has no such switch;
- `round-robin-private`: round-robin with no shared tier (no `--cache-dir`): each replica
  reuses only what it computed itself.

Every replica runs with `REPLICA_ARGS` and, as `make cluster` starts it (but in
`round-robin-private`), the shared KV tier (`--cache-dir <work>/kv --cache-shared`). Also here:
a process's resident memory, PostgreSQL's own counters for the bench's database, what the
shared tier holds on disk, and the tiers cached tokens came from (the replicas' request logs).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from app.cache import state_file
from app.cache.disk_cache import SUFFIX
from app.cache.disk_journal import JOURNAL_DIR, TRASH_DIR
from app.cluster.cluster import ROOT, Cluster, Layout
from app.cluster.nginx import Nginx
from app.db.sql_engine import normalize_url

POSTGRES = ROOT / "scripts" / "postgres.sh"
# Small and few slots, one thread each: three replicas share this machine's cores.
REPLICA_ARGS = ["-np", "2", "-c", "4096", "-t", "1", "--no-warmup"]
HASH_LINE = "hash $kvchat_key consistent;"
KINDS = ("single", "hash", "round-robin", "round-robin-private")
SHARED_TIER_FLAGS = ("--cache-dir", "--cache-shared")


class RoundRobinNginx(Nginx):
    """deploy/nginx.conf without its hash: requests go round-robin whatever their key."""

    def config(self) -> str:
        conf = super().config()
        if HASH_LINE not in conf:
            raise RuntimeError(f"deploy/nginx.conf has no '{HASH_LINE}' line to drop")
        return conf.replace(HASH_LINE, "# round-robin (bench.cluster): no hash")


class RoundRobinCluster(Cluster):
    """Behind round-robin nginx; without `shared`, the replicas have no disk tier at all (a
    private one in a directory they share would not be safe)."""

    def __init__(self, layout: Layout, shared: bool) -> None:
        super().__init__(layout)
        n = self.nginx
        self.nginx = RoundRobinNginx(n.listen, n.replicas, n.body_limit, n.prefix)
        if not shared:
            for replica in self.replicas:
                replica.command = _without_shared_tier(replica.command)


def _without_shared_tier(command: list[str]) -> list[str]:
    out, skip = [], False
    for arg in command:
        if skip or arg in SHARED_TIER_FLAGS:
            skip = arg == "--cache-dir"  # its value follows
            continue
        out.append(arg)
    return out


@contextmanager
def postgres(work: Path) -> Iterator[str]:
    """A throwaway PostgreSQL server (scripts/postgres.sh): its URL."""
    pg = work / "pg"
    url = subprocess.run(
        [str(POSTGRES), "start", str(pg)], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        yield url
    finally:
        subprocess.run([str(POSTGRES), "stop", str(pg)], check=False, capture_output=True)


def new_database(server_url: str, name: str) -> str:
    """An empty database `name` on the server: its URL."""
    admin = create_engine(
        normalize_url(server_url), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return normalize_url(server_url).set(database=name).render_as_string(hide_password=False)


@contextmanager
def started(kind: str, replicas: int, work: Path, database: str, model: str) -> Iterator[Cluster]:
    """The setup `kind` running (stopped on the way out, also after a failed start)."""
    n = 1 if kind == "single" else replicas
    layout = Layout(free_port_run(n + 1), n, work / kind, database, [*REPLICA_ARGS, "-m", model])
    if kind.startswith("round-robin"):
        cluster: Cluster = RoundRobinCluster(layout, shared=kind == "round-robin")
    else:
        cluster = Cluster(layout)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def base_url(kind: str, cluster: Cluster) -> str:
    return cluster.replicas[0].url if kind == "single" else cluster.url


def free_port_run(n: int) -> int:
    """A port P with P..P+n-1 free on 127.0.0.1 now (nginx on P, replicas above it)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n <= 65535 and all(_free(base + i) for i in range(1, n)):
            return base
    raise RuntimeError(f"no run of {n} free ports")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def rss_mib(pid: int) -> dict:
    """Resident memory now and at its peak (VmRSS, VmHWM), MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return {"rss_mib": fields.get("VmRSS"), "peak_mib": fields.get("VmHWM")}


def db_counters(url: str, settle_s: float = 2.0) -> dict:
    """PostgreSQL's counters for this database (pg_stat_database), once the backends have had
    time to report (they flush their counts about once a second while busy)."""
    time.sleep(settle_s)
    engine = create_engine(normalize_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT numbackends, xact_commit, tup_inserted, tup_updated, tup_deleted, "
                    "tup_fetched FROM pg_stat_database WHERE datname = current_database()"
                )
            ).one()
    finally:
        engine.dispose()
    return dict(row._mapping)  # noqa: SLF001 (SQLAlchemy's public Row API, underscored)


def counter_delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in before if k != "numbackends"}


def tier_stats(cache_dir: Path, model: str) -> dict:
    """What the shared KV tier holds: entry files, their bytes and tokens, journal lines."""
    fingerprint = state_file.cached_fingerprint(model)
    files = n_bytes = tokens = 0
    for path in cache_dir.glob(f"*{SUFFIX}"):
        try:
            header = state_file.load_header(path, fingerprint)
            size = path.stat().st_size
        except (OSError, state_file.StateFileError):
            continue  # evicted meanwhile
        files, n_bytes, tokens = files + 1, n_bytes + size, tokens + len(header.tokens)
    added = removed = journal_bytes = 0
    for journal in (cache_dir / JOURNAL_DIR).glob("*.log"):
        body = journal.read_text(errors="replace")
        journal_bytes += len(body.encode())
        added += sum(line.startswith("+ ") for line in body.splitlines())
        removed += sum(line.startswith("- ") for line in body.splitlines())
    trash = cache_dir / TRASH_DIR
    return {
        "files": files,
        "bytes": n_bytes,
        "tokens": tokens,
        "bytes_per_token": n_bytes / tokens if tokens else None,
        "journal_added": added,
        "journal_removed": removed,
        "journal_bytes": journal_bytes,
        "trash_files": sum(1 for _ in trash.iterdir()) if trash.exists() else 0,
    }


def cache_sources(cluster: Cluster) -> dict[str, int]:
    """Cached prompt tokens by the tier they came from, from the replicas' request log lines
    (`kvchat.requests`: `cache_source`, `cached_tokens`), so far."""
    out: Counter[str] = Counter()
    for replica in cluster.replicas:
        if not replica.log_path.exists():
            continue
        for line in replica.log_path.read_text(errors="replace").splitlines():
            _, found, body = line.partition("kvchat.requests: ")
            try:
                event = json.loads(body) if found else {}
            except ValueError:
                continue
            if event.get("cached_tokens"):
                out[event.get("cache_source") or "unknown"] += event["cached_tokens"]
    return dict(out)
