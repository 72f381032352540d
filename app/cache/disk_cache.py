"""`DiskCache`: saved KV states in files under --cache-dir, so a restart keeps them.

One file per entry, in the shared state-file format (app/cache/state_file.py). At start-up only
headers are read and indexed (radix `PrefixIndex`); data is read, and checked against its sha256,
when an entry is restored. Files of another format or model, or damaged ones, are skipped with a
warning and never loaded: a state from another model would silently corrupt the KV.

With a byte budget (--cache-disk), the least recently used entries are deleted after a write
until our entry files fit; "used" is a store or a restore. The order survives a restart: a
restore bumps the file's mtime, and the order is seeded from mtimes at start-up.

`store` and the index run on the engine thread and do no hashing and no file I/O there: the
writer thread computes the checksum and writes the file, holding a reference to the state's
pooled buffer until it is written; `read_async` reads and checks a file on a reader thread,
waiting only for that entry's own write if it is still pending.

Shared (`journal`, --cache-shared): replicas share the directory; each journals what it writes
and drops (app/cache/disk_journal.py). `refresh_async` reads the others' news on the reader
thread; the engine thread indexes it at its next lookup or store. Eviction (to the trash) and
the budget cover every replica's entries alike.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from app.cache import state_file
from app.cache.disk_journal import DiskJournal
from app.cache.prefix_index import PrefixIndex
from app.cache.state_file import StateFileError
from app.cache.state_pool import StateBlob
from mm.token_sequence import TokenSequence

log = logging.getLogger(__name__)

SUFFIX = ".kvstate"


@dataclass(slots=True)
class DiskEntry:
    path: Path
    salt: str
    tokens: TokenSequence
    n_bytes: int  # state data
    sha256: str
    file_bytes: int = 0  # the whole file: what counts against the budget
    last_used: float = 0.0  # time.time() of the last store or restore (mtime at start-up)
    documents: frozenset[str] = frozenset()  # documents whose chunks the state holds
    # Done once the file is on disk (None: it was there at start-up).
    written: Future | None = field(default=None, repr=False)


class DiskCache:
    def __init__(
        self,
        directory: str | Path,
        model_path: str,
        max_bytes: int = 0,
        journal: str | None = None,
    ) -> None:
        """`journal`: this replica's name in a directory shared with others (None: ours)."""
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        # Before the scan: what is written after it is journaled (app/cache/disk_journal.py).
        self.journal = DiskJournal(self.dir, journal) if journal is not None else None
        # Entries found (DiskEntry) and files dropped (str) by other replicas, from the reader
        # thread to the engine thread.
        self._news: queue.SimpleQueue[DiskEntry | str] = queue.SimpleQueue()
        self.model = state_file.cached_fingerprint(model_path)
        self.max_bytes = max_bytes  # 0 = no limit
        self.total_bytes = 0  # sum of file_bytes over entries
        self.entries: dict[str, DiskEntry] = {}
        self.index: PrefixIndex[str] = PrefixIndex()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-writer")
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-reader")
        # Unique, hash-free names: the engine thread names a file before the writer hashes it.
        # Shared: the replica's journal name in front, unique across machines too.
        owner = f"{self.journal.own.stem}-" if self.journal is not None else ""
        start = f"{owner}{time.time_ns():x}-{os.getpid():x}"
        self._names = (f"{start}-{i}" for i in itertools.count())
        for path in sorted(self.dir.glob("*" + SUFFIX)):
            if (entry := self._entry_of(path)) is not None:
                self._add(entry)
        self._evict()  # the budget may have been lowered since the files were written

    @property
    def shared(self) -> bool:
        return self.journal is not None

    def _entry_of(self, path: Path) -> DiskEntry | None:
        try:
            header = state_file.load_header(path, self.model)
            stat = path.stat()
        except FileNotFoundError:  # evicted meanwhile (by another replica, when shared)
            log.debug("cache file %s is gone", path.name)
            return None
        except (OSError, StateFileError) as e:
            log.warning("skipping cache file %s: %s", path.name, e)
            return None
        return DiskEntry(
            path,
            header.salt,
            header.tokens,
            header.n_bytes,
            header.sha256,
            stat.st_size,
            stat.st_mtime,
            header.documents,
        )

    def _add(self, entry: DiskEntry) -> None:
        self.entries[entry.path.name] = entry
        self.total_bytes += entry.file_bytes
        self.index.set(entry.path.name, entry.salt, entry.tokens)

    def store(
        self,
        salt: str,
        tokens: TokenSequence,
        data: StateBlob | bytes,
        documents: frozenset[str] = frozenset(),
    ) -> None:
        """Queue an entry for the writer (it takes its own reference to a blob); entries it
        wholly contains are deleted, an identical one is only touched. An entry larger than the
        whole budget is not written; older entries make room for a new one."""
        self._take_news()
        for other, n in self.index.match(salt, tokens).items():
            same = self.entries[other]
            if n == len(tokens) == len(same.tokens) and same.documents == documents:
                self._touch(same)
                return
        n_bytes = data.n_bytes if isinstance(data, StateBlob) else len(data)
        # The header's length does not depend on the checksum's value (fixed-width hex).
        header = state_file.encode_header(
            salt, tokens, n_bytes, self.model, sha256="0" * 64, documents=documents
        )
        size = len(state_file.header_bytes(header)) + n_bytes
        if self.max_bytes and size > self.max_bytes:
            log.debug("not caching a %d-byte state on disk: the budget is %d", size, self.max_bytes)
            return
        for other, n in self.index.match(salt, tokens).items():
            if n == len(self.entries[other].tokens):
                self._delete(other)
        name = next(self._names) + SUFFIX
        entry = DiskEntry(
            self.dir / name, salt, tokens.copy(), n_bytes, "", size, time.time(), documents
        )
        blob = data.retain() if isinstance(data, StateBlob) else data
        entry.written = self._writer.submit(self._write, entry, header, blob, self.journal)
        self._add(entry)
        self._evict(keep=name)

    @staticmethod
    def _write(
        entry: DiskEntry, header: dict, blob: StateBlob | bytes, journal: DiskJournal | None
    ) -> None:
        """Writer thread: checksum, header, atomic file write (then journaled, when shared);
        then the blob goes back."""
        try:
            data = blob.view() if isinstance(blob, StateBlob) else blob
            header["sha256"] = entry.sha256 = state_file.checksum(data)
            state_file.write(entry.path, state_file.header_bytes(header), data)
        finally:
            if isinstance(blob, StateBlob):
                blob.release()
        if journal is not None:
            journal.wrote(entry.path.name)

    def refresh_async(self) -> Future:
        """Shared: read the other replicas' news on the reader thread (queued before any read
        asked for after it); the engine thread indexes it at its next `best` or `store`."""
        return self._reader.submit(self._refresh)

    def _refresh(self) -> None:
        if self.journal is None:
            return
        news = self.journal.news()
        for name in news.added:
            known = name in self.entries  # a racy read: `_take_news` checks again
            if name.endswith(SUFFIX) and not known and (e := self._entry_of(self.dir / name)):
                self._news.put(e)
        for name in news.removed:
            self._news.put(name)

    def _take_news(self) -> None:
        """Engine thread: index what `_refresh` found, forget what others dropped."""
        if self.journal is None:
            return
        changed = False
        while not self._news.empty():  # this thread is the only consumer
            item = self._news.get()
            if isinstance(item, DiskEntry):
                if item.path.name not in self.entries:
                    self._add(item)
                    changed = True
            elif item in self.entries:
                self._forget(item)
        if changed:
            self._evict()

    def best(self, salt: str, prompt: TokenSequence) -> tuple[DiskEntry, int] | None:
        self._take_news()
        found = self.index.best(salt, prompt)
        return (self.entries[found[0]], found[1]) if found else None

    def read(self, entry: DiskEntry) -> bytes | None:
        """The entry's state bytes, or None (and the entry forgotten) if missing or damaged.
        Reads and checks on the calling thread; the engine uses `read_async`."""
        data = self._load(entry)
        return self.finish_read(entry, data)

    def read_async(self, entry: DiskEntry) -> Future:
        """Read and check the entry on the reader thread (after its own pending write, if
        any); the future's result is the bytes or None. Hand it to `finish_read` on the
        engine thread."""
        return self._reader.submit(self._load, entry)

    def finish_read(self, entry: DiskEntry, data: bytes | None) -> bytes | None:
        """Engine thread: count a read as use, or forget an entry that could not be read."""
        if entry.path.name not in self.entries:
            return data  # deleted meanwhile (reset, evicted): its bytes are still right
        if data is None:
            self._delete(entry.path.name)
        else:
            self._touch(entry)
        return data

    def _load(self, entry: DiskEntry) -> bytes | None:
        if entry.written is not None:
            try:
                entry.written.result()
            except Exception as e:  # the write failed: there is nothing to read
                log.warning("cache file %s was not written: %s", entry.path.name, e)
                return None
        try:
            return state_file.load(entry.path, self.model)[1]
        except StateFileError as e:
            log.warning("cache file %s is damaged (%s); dropping it", entry.path.name, e)
        except OSError as e:
            log.warning("cache file %s unreadable: %s", entry.path.name, e)
        return None

    def forget_documents(self, documents: set[str]) -> int:
        """Delete every file holding a chunk of these documents; returns how many."""
        self._take_news()
        gone = [name for name, e in self.entries.items() if e.documents & documents]
        for name in gone:
            self._delete(name)
        return len(gone)

    def clear(self) -> None:
        for name in list(self.entries):
            self._delete(name)

    def flush(self) -> None:
        self._reader.shutdown(wait=True)
        self._writer.shutdown(wait=True)

    def _touch(self, entry: DiskEntry) -> None:
        entry.last_used = time.time()
        # The mtime carries the LRU order across a restart; queued after any pending write.
        with contextlib.suppress(RuntimeError):  # the writer is shut down: only memory counts
            self._writer.submit(_utime, entry.path)

    def _evict(self, keep: str | None = None) -> None:
        """Delete least recently used entries until the budget holds (never `keep`, the entry
        just stored: it was checked to fit on its own)."""
        if not self.max_bytes:
            return
        while self.total_bytes > self.max_bytes:
            victims = [e for name, e in self.entries.items() if name != keep]
            if not victims:
                return
            self._delete(min(victims, key=lambda e: e.last_used).path.name)

    def _delete(self, name: str) -> None:
        entry = self._forget(name)
        if self.journal is not None:  # another replica may be reading it
            self._writer.submit(self.journal.discard, entry.path)
        else:
            self._writer.submit(entry.path.unlink, missing_ok=True)

    def _forget(self, name: str) -> DiskEntry:
        entry = self.entries.pop(name)
        self.total_bytes -= entry.file_bytes
        self.index.remove(name)
        return entry


def _utime(path: Path) -> None:
    with contextlib.suppress(OSError):  # deleted meanwhile: nothing to refresh
        os.utime(path)
