"""Schemathesis against our own OpenAPI schema, through a real server: no 5xx, and every
status, content type and body the schema documents.

Bounded and reproducible: a few examples per operation, deterministic generation (no example
database, no random seed), generation capped at 4 tokens (-n 4), a time budget. The summary
line is printed (pytest -s shows it). No --max-time: with it, fuzzing repeats until the time
is spent; the run is bounded by the examples (about 1,800 requests, ~20 s here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ServerProcess

NEW_APIS = {"/v1/embeddings", "/v1/messages", "/v1/responses", "/v1/responses/{response_id}"}
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
)


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_and_no_schema_mismatch(tmp_path: Path):
    args = ("-np", "2", "-c", "512", "--max-tokens-limit", "4", "--timeout", "60")
    with ServerProcess(*args, "--slot-save-path", str(tmp_path / "slots")) as server:
        # Every API the server speaks is fuzzed, the tool-calling ones among them (with links:
        # a created response feeds GET and DELETE /v1/responses/{id}).
        paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
        assert set(paths) >= NEW_APIS, NEW_APIS - set(paths)
        st = Path(sys.executable).with_name("schemathesis")
        done = subprocess.run(
            [
                str(st),
                "run",
                f"{server.base_url}/openapi.json",
                "--checks",
                ",".join(CHECKS),
                "--max-examples",
                "10",
                "--generation-deterministic",
                "--workers",
                "1",
                "--request-timeout",
                "60",
                "--no-color",
            ],
            cwd=tmp_path,  # its own files (.schemathesis/) stay out of the checkout
            capture_output=True,
            text=True,
            timeout=600,
        )
    summary = [line for line in done.stdout.splitlines() if line.startswith("=") and " in " in line]
    print("\nschemathesis:", summary[-1] if summary else done.stdout[-2000:])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
