"""`DiskJournal`: how replicas that share one --cache-dir (--cache-shared) learn about each
other's disk entries without listing the directory for every request.

Each replica appends to a journal of its own, `<dir>/journal/<replica>.log`: `+ FILE` once FILE
is in place (written to a temp file and renamed), `- FILE` once it was evicted or dropped.
`news()` reads the complete lines the other replicas added since the last call: one stat per
journal, then only the new bytes, so its cost grows with the replicas and the new entries,
never with the directory. At start-up the disk tier indexes the whole directory once; the
journals are read from their ends, taken before that scan (an entry written meanwhile is then
both scanned and journaled: indexing it twice is harmless). A replica's own journal starts as a
new, empty file (another inode: readers then read it from its start).

A journal only says where to look. An entry it names is indexed through its file's header (the
model fingerprint is checked there) and its data checked against the header's sha256 when read;
a line about a file that is gone costs one failed open.

Evicted files are moved to `<dir>/trash/` and deleted after `TRASH_GRACE_S`, so a replica that
opened a file before another evicted it reads it whole: a rename keeps an open file intact on
every POSIX file system and on NFS, where deleting it could leave another client's open handle
stale.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

JOURNAL_DIR, TRASH_DIR = "journal", "trash"
# Longer than any read of one state file takes.
TRASH_GRACE_S = 300.0
TRASH_SWEEP_EVERY_S = 30.0
# A journal this long is started afresh: a reader that had not read its last lines yet misses
# them (those entries are found again only after its restart), which costs cache hits, never
# correctness.
MAX_JOURNAL_BYTES = 8 << 20


@dataclass(slots=True)
class JournalNews:
    """Files the other replicas wrote or dropped since the last `news()`."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Cursor:
    inode: int
    offset: int  # bytes of whole lines read


class DiskJournal:
    """Appends happen on the disk tier's writer thread; `news()` runs on its reader thread."""

    def __init__(self, directory: Path, replica: str) -> None:
        self.journals = directory / JOURNAL_DIR
        self.trash = directory / TRASH_DIR
        self.journals.mkdir(parents=True, exist_ok=True)
        self.trash.mkdir(parents=True, exist_ok=True)
        self.own = self.journals / (journal_name(replica) + ".log")
        self._cursors: dict[str, _Cursor] = {}
        self._swept = 0.0
        self._start_own()
        for path in self._others():  # what is already there, the disk tier scans
            with contextlib.suppress(OSError):
                st = path.stat()
                self._cursors[path.name] = _Cursor(st.st_ino, st.st_size)

    def wrote(self, file: str) -> None:
        self._append(f"+ {file}\n")

    def discard(self, path: Path) -> None:
        """Evict `path`: into the trash (a reader that opened it keeps reading), journaled."""
        with contextlib.suppress(FileNotFoundError):
            moved = self.trash / path.name
            os.replace(path, moved)
            os.utime(moved)  # the grace period runs from now, not from its last use
        self._append(f"- {path.name}\n")
        self._sweep()

    def news(self) -> JournalNews:
        """The other replicas' whole lines written since the last call."""
        news = JournalNews()
        for path in self._others():
            try:
                lines = self._new_lines(path)
            except OSError:
                continue  # removed meanwhile, or unreadable: nothing to learn from it
            for line in lines:
                op, _, file = line.partition(" ")
                if not file or "/" in file or file.startswith("."):
                    continue  # not a line of ours
                if op == "+":
                    news.added.append(file)
                elif op == "-":
                    news.removed.append(file)
        return news

    def _new_lines(self, path: Path) -> list[str]:
        st = path.stat()
        cursor = self._cursors.get(path.name)
        if cursor is None or cursor.inode != st.st_ino or st.st_size < cursor.offset:
            cursor = self._cursors[path.name] = _Cursor(st.st_ino, 0)  # new, or started afresh
        if st.st_size == cursor.offset:
            return []
        with path.open("rb") as f:
            f.seek(cursor.offset)
            chunk = f.read(st.st_size - cursor.offset)
        whole = chunk.rfind(b"\n") + 1  # a line still being written waits for the next call
        cursor.offset += whole
        return chunk[:whole].decode(errors="replace").splitlines()

    def _others(self) -> list[Path]:
        return [p for p in self.journals.glob("*.log") if p.name != self.own.name]

    def _append(self, line: str) -> None:
        # O_APPEND, one write of one short line: lines of one writer never interleave.
        fd = os.open(self.own, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > MAX_JOURNAL_BYTES:
            self._start_own()

    def _start_own(self) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.journals)
        os.close(fd)
        os.replace(tmp, self.own)

    def _sweep(self) -> None:
        now = time.time()
        if now - self._swept < TRASH_SWEEP_EVERY_S:
            return
        self._swept = now
        for entry in os.scandir(self.trash):
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime < now - TRASH_GRACE_S:
                    os.unlink(entry.path)


def journal_name(replica: str) -> str:
    """A replica's name as a plain file name (`host:8081` -> `host_8081`)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", replica).lstrip(".") or "replica"
