"""`python -m app.cluster` (`make cluster`): a cluster on this machine, in the foreground.

N replicas on PORT+1..PORT+N behind nginx on PORT, on DATABASE_URL or else a throwaway
PostgreSQL (scripts/postgres.sh), with the KV tier they share. Flags after `--` go to every
replica. Ctrl-C or SIGTERM stops all of it; the work directory (data directories, the shared
KV tier, logs) is deleted then unless --work-dir names one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from app.cluster.cluster import ROOT, Cluster, Layout

POSTGRES = ROOT / "scripts" / "postgres.sh"


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    own, replica_args = argv, []
    if "--" in argv:
        i = argv.index("--")
        own, replica_args = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(prog="python -m app.cluster", description=__doc__)
    p.add_argument("--replicas", type=int, default=2, help="how many (default 2)")
    p.add_argument("--port", type=int, default=8080, help="nginx's port (default 8080)")
    p.add_argument("--host", default="127.0.0.1", help="nginx's address (default 127.0.0.1)")
    p.add_argument("--work-dir", default=None, help="kept afterwards (default: a temp dir)")
    args = p.parse_args(own)
    if args.replicas < 1:
        p.error("--replicas must be at least 1")
    return args, replica_args


def main(argv: list[str] | None = None) -> int:
    args, replica_args = parse(sys.argv[1:] if argv is None else argv)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kvchat-cluster-")).resolve()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    database = os.environ.get("DATABASE_URL") or os.environ.get("KVCHAT_DATABASE_URL")
    pg_dir = work / "pg"
    own_postgres = not database
    cluster: Cluster | None = None
    try:
        if own_postgres:
            database = subprocess.run(
                [str(POSTGRES), "start", str(pg_dir)], check=True, capture_output=True, text=True
            ).stdout.strip()
            print(f"cluster: a throwaway PostgreSQL at {database}", flush=True)
        layout = Layout(args.port, args.replicas, work, database, replica_args, args.host)
        cluster = Cluster(layout, echo=lambda line: print(line, flush=True))
        cluster.start()
        print(f"cluster: {args.replicas} replicas behind nginx on {cluster.url} ", flush=True)
        print(f"cluster: work directory {work}; Ctrl-C stops it", flush=True)
        while not stop.wait(1.0):
            nginx = cluster.nginx.proc
            if nginx is not None and nginx.poll() is not None:
                print(f"cluster: nginx exited:\n{cluster.nginx.error_log()}", flush=True)
                return 1
        return 0
    except (RuntimeError, TimeoutError, FileNotFoundError, subprocess.CalledProcessError) as e:
        print(f"cluster: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        print("cluster: stopping", flush=True)
        if cluster is not None:
            cluster.stop()
        if own_postgres:
            subprocess.run([str(POSTGRES), "stop", str(pg_dir)], check=False)
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
