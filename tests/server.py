"""The server-process helper lives in bench/lib/server_process.py (bench/ and tests/ both import
it); this module keeps the old import path working for tests written against it."""

from __future__ import annotations

from bench.lib.server_process import ROOT, ManagedProcess, ServerProcess, free_port, make_key

__all__ = ["ROOT", "ManagedProcess", "ServerProcess", "free_port", "make_key"]
