"""`DiskCache`: saved KV states in files under --cache-dir, so a restart keeps them.

One file per entry: a magic line, one JSON header line (format, model fingerprint, salt, tokens,
media chunks, data size and sha256), then the raw state bytes. At start-up only headers are
read and indexed (radix `PrefixIndex`); data is read, and checked against its sha256, when an
entry is restored. Files of another format or model, or damaged ones, are skipped with a warning
and never loaded: a state from another model would silently corrupt the KV.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from app.cache.prefix_index import PrefixIndex
from mm.token_sequence import MediaChunk, TokenSequence

log = logging.getLogger(__name__)

MAGIC = b"KVCHAT-STATE\n"
FORMAT = 1
SUFFIX = ".kvstate"


def model_fingerprint(path: str) -> str:
    """Cheap identity of a model file: size plus hashes of its first and last MiB."""
    size = os.path.getsize(path)
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        f.seek(max(size - (1 << 20), 0))
        h.update(f.read(1 << 20))
    return h.hexdigest()[:32]


@dataclass(slots=True)
class DiskEntry:
    path: Path
    salt: str
    tokens: TokenSequence
    n_bytes: int
    sha256: str


def _header(salt: str, tokens: TokenSequence, data: bytes, model: str) -> dict:
    return {
        "format": FORMAT,
        "model": model,
        "salt": salt,
        "tokens": [t if t >= 0 else -1 for t in tokens.tokens],
        "media": [[s, c.id, c.n_tokens, c.n_pos] for s, c in tokens.media()],
        "n_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _tokens_of(header: dict) -> TokenSequence:
    media = {s: MediaChunk(i, n, p) for s, i, n, p in header["media"]}
    seq, i, raw = TokenSequence(), 0, header["tokens"]
    while i < len(raw):
        if i in media:
            seq.add_media(media[i])
            i += media[i].n_tokens
        else:
            seq.append(raw[i])
            i += 1
    return seq


class DiskCache:
    def __init__(self, directory: str | Path, model_path: str) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.model = model_fingerprint(model_path)
        self.entries: dict[str, DiskEntry] = {}
        self.index: PrefixIndex[str] = PrefixIndex()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-writer")
        for path in sorted(self.dir.glob("*" + SUFFIX)):
            self._load_header(path)

    def _load_header(self, path: Path) -> None:
        try:
            with path.open("rb") as f:
                if f.readline() != MAGIC:
                    raise ValueError("not a kvchat state file")
                header = json.loads(f.readline())
            if header.get("format") != FORMAT:
                raise ValueError(f"format {header.get('format')}, expected {FORMAT}")
            if header.get("model") != self.model:
                raise ValueError("saved with another model")
            tokens = _tokens_of(header)
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("skipping cache file %s: %s", path.name, e)
            return
        self._add(DiskEntry(path, header["salt"], tokens, header["n_bytes"], header["sha256"]))

    def _add(self, entry: DiskEntry) -> None:
        self.entries[entry.path.name] = entry
        self.index.set(entry.path.name, entry.salt, entry.tokens)

    def store(self, salt: str, tokens: TokenSequence, data: bytes) -> None:
        """Write an entry in the background; entries it wholly contains are deleted."""
        header = _header(salt, tokens, data, self.model)
        name = (
            hashlib.sha256(
                json.dumps([self.model, salt, header["tokens"], header["media"]]).encode()
            ).hexdigest()[:40]
            + SUFFIX
        )
        if name in self.entries:
            return
        for other, n in self.index.match(salt, tokens).items():
            if n == len(self.entries[other].tokens):
                self._delete(other)
        entry = DiskEntry(self.dir / name, salt, tokens.copy(), len(data), header["sha256"])
        self._add(entry)
        self._writer.submit(self._write, entry.path, header, data)

    @staticmethod
    def _write(path: Path, header: dict, data: bytes) -> None:
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            f.write(MAGIC + json.dumps(header).encode() + b"\n" + data)
        tmp.replace(path)  # atomic: a crash never leaves a half-written entry under its name

    def best(self, salt: str, prompt: TokenSequence) -> tuple[DiskEntry, int] | None:
        found = self.index.best(salt, prompt)
        return (self.entries[found[0]], found[1]) if found else None

    def read(self, entry: DiskEntry) -> bytes | None:
        """The entry's state bytes, or None (and the entry forgotten) if missing or damaged."""
        try:
            with entry.path.open("rb") as f:
                f.readline()
                f.readline()
                data = f.read()
            if len(data) == entry.n_bytes and hashlib.sha256(data).hexdigest() == entry.sha256:
                return data
            log.warning("cache file %s is damaged; dropping it", entry.path.name)
        except OSError as e:
            log.warning("cache file %s unreadable: %s", entry.path.name, e)
        self._delete(entry.path.name)
        return None

    def clear(self) -> None:
        for name in list(self.entries):
            self._delete(name)

    def flush(self) -> None:
        self._writer.shutdown(wait=True)

    def _delete(self, name: str) -> None:
        entry = self.entries.pop(name)
        self.index.remove(name)
        self._writer.submit(entry.path.unlink, missing_ok=True)
