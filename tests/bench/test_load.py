"""A smoke run of the load test (bench/load.py): a few users for a few seconds, no 5xx, every
completed session turn stored. The real run is `make load` (32 users, minutes)."""

from __future__ import annotations

import subprocess
import sys

from bench.lib.server_process import ROOT


def test_a_short_load_run_has_no_server_errors_and_loses_no_turn():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.load",
            "--users",
            "3",
            "--duration",
            "4",
            "--max-tokens",
            "4",
            "--no-images",
            "--no-write",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "5xx (not 503): 0" in done.stdout
    assert "stored turns missing: 0" in done.stdout
