"""`DiskCache`: saved KV states in files under --cache-dir, so a restart keeps them.

One file per entry, in the shared state-file format (app/cache/state_file.py). At start-up only
headers are read and indexed (radix `PrefixIndex`); data is read, and checked against its sha256,
when an entry is restored. Files of another format or model, or damaged ones, are skipped with a
warning and never loaded: a state from another model would silently corrupt the KV.

With a byte budget (--cache-disk), the least recently used entries are deleted after a write
until our entry files fit; "used" is a store or a restore. The order survives a restart: a
restore bumps the file's mtime, and the order is seeded from mtimes at start-up.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from app.cache import state_file
from app.cache.prefix_index import PrefixIndex
from app.cache.state_file import StateFileError
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


class DiskCache:
    def __init__(self, directory: str | Path, model_path: str, max_bytes: int = 0) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.model = state_file.cached_fingerprint(model_path)
        self.max_bytes = max_bytes  # 0 = no limit
        self.total_bytes = 0  # sum of file_bytes over entries
        self.entries: dict[str, DiskEntry] = {}
        self.index: PrefixIndex[str] = PrefixIndex()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-writer")
        for path in sorted(self.dir.glob("*" + SUFFIX)):
            self._load_header(path)
        self._evict()  # the budget may have been lowered since the files were written

    def _load_header(self, path: Path) -> None:
        try:
            header = state_file.load_header(path, self.model)
            stat = path.stat()
        except (OSError, StateFileError) as e:
            log.warning("skipping cache file %s: %s", path.name, e)
            return
        self._add(
            DiskEntry(
                path,
                header.salt,
                header.tokens,
                header.n_bytes,
                header.sha256,
                stat.st_size,
                stat.st_mtime,
                header.documents,
            )
        )

    def _add(self, entry: DiskEntry) -> None:
        self.entries[entry.path.name] = entry
        self.total_bytes += entry.file_bytes
        self.index.set(entry.path.name, entry.salt, entry.tokens)

    def store(
        self,
        salt: str,
        tokens: TokenSequence,
        data: bytes,
        documents: frozenset[str] = frozenset(),
    ) -> None:
        """Write an entry in the background; entries it wholly contains are deleted. An entry
        larger than the whole budget is not written; older entries make room for a new one."""
        header = state_file.encode_header(salt, tokens, data, self.model, documents)
        name = (
            hashlib.sha256(
                json.dumps([self.model, salt, header["tokens"], header["media"]]).encode()
            ).hexdigest()[:40]
            + SUFFIX
        )
        if name in self.entries:
            self._touch(self.entries[name])
            return
        head = state_file.header_bytes(header)
        size = len(head) + len(data)
        if self.max_bytes and size > self.max_bytes:
            log.debug("not caching a %d-byte state on disk: the budget is %d", size, self.max_bytes)
            return
        for other, n in self.index.match(salt, tokens).items():
            if n == len(self.entries[other].tokens):
                self._delete(other)
        entry = DiskEntry(
            self.dir / name,
            salt,
            tokens.copy(),
            len(data),
            header["sha256"],
            size,
            time.time(),
            documents,
        )
        self._add(entry)
        self._writer.submit(state_file.write, entry.path, head, data)
        self._evict(keep=name)

    def best(self, salt: str, prompt: TokenSequence) -> tuple[DiskEntry, int] | None:
        found = self.index.best(salt, prompt)
        return (self.entries[found[0]], found[1]) if found else None

    def read(self, entry: DiskEntry) -> bytes | None:
        """The entry's state bytes, or None (and the entry forgotten) if missing or damaged."""
        try:
            _, data = state_file.load(entry.path, self.model)
            self._touch(entry)
            return data
        except StateFileError as e:
            log.warning("cache file %s is damaged (%s); dropping it", entry.path.name, e)
        except OSError as e:
            log.warning("cache file %s unreadable: %s", entry.path.name, e)
        self._delete(entry.path.name)
        return None

    def forget_documents(self, documents: set[str]) -> int:
        """Delete every file holding a chunk of these documents; returns how many."""
        gone = [name for name, e in self.entries.items() if e.documents & documents]
        for name in gone:
            self._delete(name)
        return len(gone)

    def clear(self) -> None:
        for name in list(self.entries):
            self._delete(name)

    def flush(self) -> None:
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
        entry = self.entries.pop(name)
        self.total_bytes -= entry.file_bytes
        self.index.remove(name)
        self._writer.submit(entry.path.unlink, missing_ok=True)


def _utime(path: Path) -> None:
    with contextlib.suppress(OSError):  # deleted meanwhile: nothing to refresh
        os.utime(path)
