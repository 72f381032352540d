"""nginx in front of the replicas: deploy/nginx.conf filled in, and run unprivileged.

`render` fills the template's @@NAME@@ fields. `Nginx` runs it in the foreground under a prefix
directory of its own (pid, logs, temp paths), so it needs no root and no system directories:
`make cluster` and the tests start it on a loopback port. For a machine's own nginx, print a
configuration with `python -m app.cluster.nginx --replica HOST:PORT ... > kvchat.conf`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from app.api.middleware.body_limit import largest_body

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"
# Debian keeps nginx in /usr/sbin, which is not on every user's PATH.
CANDIDATES = ("nginx", "/usr/sbin/nginx", "/usr/local/sbin/nginx")


def render(
    listen: str,
    replicas: list[str],
    body_limit: int,
    prefix: Path | str,
    access_log: str = "off",
) -> str:
    """The configuration: nginx on `listen` (`PORT` or `HOST:PORT`) in front of `replicas`
    (`HOST:PORT` each), refusing bodies over `body_limit` bytes, its files under `prefix`."""
    if not replicas:
        raise ValueError("at least one replica")
    # max_fails=1 fail_timeout=10s: a replica that refused a connection is skipped for 10 s,
    # then tried again (a restarted replica gets its sessions back).
    servers = "\n".join(f"        server {r} max_fails=1 fail_timeout=10s;" for r in replicas)
    fields = {
        "PREFIX": str(prefix),
        "ACCESS_LOG": access_log,
        "SERVERS": servers,
        "LISTEN": listen,
        "BODY_LIMIT": str(body_limit),
        "TRIES": str(len(replicas)),
    }
    text = TEMPLATE.read_text()
    for name, value in fields.items():
        text = text.replace(f"@@{name}@@", value)
    return text


def find_nginx() -> str | None:
    for candidate in CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


class Nginx:
    """nginx on `listen` in front of `replicas`, its files in `prefix` (created)."""

    def __init__(
        self, listen: str, replicas: list[str], body_limit: int, prefix: Path | str
    ) -> None:
        self.prefix = Path(prefix).resolve()
        self.listen, self.replicas, self.body_limit = listen, replicas, body_limit
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, binary: str | None = None) -> subprocess.Popen[bytes]:
        binary = binary or find_nginx()
        if binary is None:
            raise FileNotFoundError("nginx not found: scripts/nginx.sh installs nginx-light")
        self.prefix.mkdir(parents=True, exist_ok=True)
        conf = self.prefix / "nginx.conf"
        conf.write_text(self.config())
        # -e: the error log before the configuration is read (the default is a system path).
        command = [binary, "-p", str(self.prefix), "-e", str(self.prefix / "error.log")]
        test = subprocess.run([*command, "-t", "-q", "-c", str(conf)], capture_output=True)
        if test.returncode != 0:
            raise RuntimeError(f"nginx rejected {conf}: {test.stderr.decode(errors='replace')}")
        # Its own session: Ctrl-C reaches the cluster, which stops nginx (`stop`).
        self.proc = subprocess.Popen([*command, "-c", str(conf)], start_new_session=True)
        return self.proc

    def config(self) -> str:
        """The configuration `start` writes (a variant overrides it:
        bench/workloads/cluster_setups.py)."""
        return render(self.listen, self.replicas, self.body_limit, self.prefix)

    def error_log(self) -> str:
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """SIGQUIT: nginx's graceful stop (open streams end first), SIGKILL if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(3)  # SIGQUIT
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.cluster.nginx", description=__doc__)
    p.add_argument("--listen", default="8080", help="nginx's PORT or HOST:PORT (default 8080)")
    p.add_argument("--replica", action="append", required=True, help="HOST:PORT, repeated")
    p.add_argument("--prefix", default="/var/lib/kvchat-nginx", help="pid, logs, temp files")
    p.add_argument("--body-limit", type=int, default=None, help="bytes (default: the servers')")
    p.add_argument("--access-log", default="off", help="a path, or off")
    args = p.parse_args(argv)
    limit = args.body_limit if args.body_limit is not None else largest_body_of_settings()
    sys.stdout.write(render(args.listen, args.replica, limit, args.prefix, args.access_log))
    return 0


def largest_body_of_settings(flags: list[str] | None = None) -> int:
    """The largest request body a replica started with `flags` (and KVCHAT_*) accepts."""
    from app.__main__ import parse_args
    from app.config import Settings

    return largest_body(Settings(**parse_args(flags or [])))


if __name__ == "__main__":
    sys.exit(main())
