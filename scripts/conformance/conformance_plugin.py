"""pytest plugin for llama.cpp's server tests run against kvchat (scripts/conformance/run.py).

Two modes, chosen by the environment run.py sets:

- ours (CONFORMANCE_MODE=ours): only the tests llama-server itself passes with the packaged model
  run (the list recorded from the real binary, CONFORMANCE_PASSES); the others are deselected.
  The intended differences (the table in docs/llama-server.md, CONFORMANCE_DIFFS) are strict
  xfails: each must fail, with its reason shown, and any other failure fails the run. A listed
  difference that llama-server does not pass, or that names no test, is a usage error, so the
  list cannot go stale.
- record (CONFORMANCE_MODE=record): every test runs; the ids of those that pass are written to
  CONFORMANCE_PASSES, replacing the lines of the files this run collected and keeping the rest.

In both, the suite's model downloads are skipped (pytest_sessionstart).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# A row of a table in the doc: | `unit/test_x.py` or `unit/test_x.py::test_y[...]` | why |
ROW = re.compile(r"^\|\s*`(unit/[^`]+)`\s*\|(.+)\|\s*$")
START, END = "<!-- conformance:start -->", "<!-- conformance:end -->"


def read_table(doc: Path, start: str, end: str) -> dict[str, str]:
    """First column -> reason, from the rows between the markers `start` and `end` of `doc`;
    ValueError when the markers are missing."""
    text = doc.read_text()
    if start not in text or end not in text:
        raise ValueError(f"{doc}: no {start} ... {end} table")
    table = text.split(start, 1)[1].split(end, 1)[0]
    rows = (ROW.match(line.strip()) for line in table.splitlines())
    return {m.group(1): " ".join(m.group(2).split()) for m in rows if m}


def read_differences(doc: Path) -> dict[str, str]:
    """Test id -> reason, from the intended differences table of `doc`."""
    try:
        return read_table(doc, START, END)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def read_passes(path: Path) -> set[str] | None:
    """The recorded ids; None before any recording (then every test runs)."""
    if not path.exists():
        return None
    return {line.strip() for line in path.read_text().splitlines() if line.strip()}


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class Ours:
    def __init__(self, passes: set[str] | None, differences: dict[str, str]) -> None:
        self.passes = passes
        self.differences = differences

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list) -> None:
        files = {file_of(item.nodeid) for item in items}
        ids = {item.nodeid for item in items}
        for nodeid in self.differences:
            if file_of(nodeid) not in files:
                continue
            if nodeid not in ids:
                raise pytest.UsageError(f"intended difference {nodeid} names no test")
            if self.passes is not None and nodeid not in self.passes:
                raise pytest.UsageError(
                    f"intended difference {nodeid}: llama-server does not pass it either"
                )
        kept, dropped = [], []
        for item in items:
            runs = self.passes is None or item.nodeid in self.passes
            (kept if runs else dropped).append(item)
            reason = self.differences.get(item.nodeid)
            if reason:
                item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept


class Record:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: set[str] = set()
        self.passed: set[str] = set()

    def pytest_collection_modifyitems(self, items: list) -> None:
        self.files = {file_of(item.nodeid) for item in items}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    def pytest_sessionfinish(self) -> None:
        kept = {n for n in read_passes(self.path) or () if file_of(n) not in self.files}
        lines = sorted(kept | self.passed)
        self.path.write_text("".join(line + "\n" for line in lines))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The suite's session fixture starts every preset once to download its model; the packaged
    model needs no download, and a preset this server refuses (reranking, ...) would error every
    test instead of its own."""
    import utils  # the suite's, on sys.path once its conftest is loaded

    utils.ServerPreset.load_all = staticmethod(lambda: None)


def pytest_configure(config: pytest.Config) -> None:
    mode = os.environ.get("CONFORMANCE_MODE")
    passes = Path(os.environ["CONFORMANCE_PASSES"])
    if mode == "record":
        config.pluginmanager.register(Record(passes), "conformance-record")
    elif mode == "ours":
        differences = read_differences(Path(os.environ["CONFORMANCE_DIFFS"]))
        config.pluginmanager.register(Ours(read_passes(passes), differences), "conformance")
