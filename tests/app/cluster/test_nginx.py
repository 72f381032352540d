"""deploy/nginx.conf as app/cluster/nginx.py fills it: every field filled, accepted by nginx
(`nginx -t`), with the directives the cluster relies on."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.api.middleware.body_limit import largest_body
from app.cluster.nginx import find_nginx, largest_body_of_settings, main, render
from app.config import Settings


def test_every_field_is_filled_and_the_directives_are_there(tmp_path: Path):
    conf = render("127.0.0.1:9000", ["127.0.0.1:9001", "10.0.0.2:8080"], 12345, tmp_path)
    assert "@@" not in conf
    for directive in (
        "listen 127.0.0.1:9000;",
        "server 127.0.0.1:9001 max_fails=1 fail_timeout=10s;",
        "server 10.0.0.2:8080 max_fails=1 fail_timeout=10s;",
        "hash $kvchat_key consistent;",
        "client_max_body_size 12345;",
        "proxy_buffering off;",
        "proxy_next_upstream error timeout http_502 http_503 non_idempotent;",
        "proxy_next_upstream_tries 2;",
        f"pid {tmp_path}/nginx.pid;",
        "daemon off;",
        "proxy_set_header Idempotency-Key $kvchat_idempotency_key;",
        "map $http_idempotency_key $kvchat_idempotency_key {",
    ):
        assert directive in conf, directive
    with pytest.raises(ValueError):
        render("9000", [], 1, tmp_path)


def test_nginx_accepts_the_configuration(tmp_path: Path):
    binary = find_nginx()
    if binary is None:
        pytest.fail("nginx not found: scripts/nginx.sh installs it (make test runs it)")
    conf = tmp_path / "nginx.conf"
    conf.write_text(render("127.0.0.1:9000", ["127.0.0.1:9001"], 1 << 20, tmp_path))
    checked = subprocess.run(
        [binary, "-t", "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(conf)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_body_limit_is_the_replicas_largest_body():
    assert largest_body_of_settings([]) == largest_body(Settings())
    big = largest_body_of_settings(["--max-body-bytes", str(1 << 30)])
    assert big == 1 << 30


def test_the_command_prints_a_configuration(capsys: pytest.CaptureFixture[str]):
    assert main(["--replica", "a:1", "--replica", "b:2", "--listen", "80"]) == 0
    out = capsys.readouterr().out
    assert "server a:1 " in out and "server b:2 " in out and "listen 80;" in out
