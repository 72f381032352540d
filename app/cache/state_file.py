"""The saved-KV-state file format, shared by the disk tier and `/slots` save/restore.

A file is a magic line, one JSON header line (format, model fingerprint, salt, tokens, media
chunks, data size and sha256), then the raw `llama_state_seq_get_data` bytes. The header is
cheap to read on its own (the disk tier indexes headers only); the data is checked against its
sha256 before anyone restores it: a damaged state, or one from another model, would silently
corrupt the KV.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import BinaryIO

from mm.token_sequence import MediaChunk, TokenSequence

MAGIC = b"KVCHAT-STATE\n"
FORMAT = 1


class StateFileError(ValueError):
    """Not a state file of this format and model, or a damaged one."""


def model_fingerprint(path: str) -> str:
    """Cheap identity of a model file: size plus hashes of its first and last MiB."""
    size = os.path.getsize(path)
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        f.seek(max(size - (1 << 20), 0))
        h.update(f.read(1 << 20))
    return h.hexdigest()[:32]


def cached_fingerprint(path: str) -> str:
    """`model_fingerprint`, computed once per file version (a stat instead of 2 MiB of reads)."""
    stat = os.stat(path)
    return _fingerprint(path, stat.st_size, stat.st_mtime_ns)


@cache
def _fingerprint(path: str, _size: int, _mtime_ns: int) -> str:
    return model_fingerprint(path)


def model_identity(model_path: str, mmproj_path: str | None = None) -> str:
    """What a KV state depends on besides its tokens: the model file's content, and the
    projector's where there is one (its image embeddings are in the KV). A path that cannot be
    read stands for itself."""
    parts = []
    for path in (model_path, mmproj_path):
        if path:
            try:
                parts.append(cached_fingerprint(path))
            except OSError:
                parts.append(path)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


@dataclass(slots=True)
class StateHeader:
    salt: str
    tokens: TokenSequence
    n_bytes: int  # state data only
    sha256: str  # of the state data
    # Ids of the documents whose chunks the state holds: deleting one drops the file.
    documents: frozenset[str] = frozenset()


def checksum(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def encode_header(
    salt: str,
    tokens: TokenSequence,
    data: bytes | int,
    model: str,
    *,
    sha256: str | None = None,
    documents: frozenset[str] = frozenset(),
) -> dict:
    """The header of a state; `data` is the state or its size when `sha256` is given (the disk
    tier's writer fills the checksum in later, off the engine thread)."""
    n_bytes = data if isinstance(data, int) else len(data)
    return {
        "format": FORMAT,
        "model": model,
        "salt": salt,
        "tokens": [t if t >= 0 else -1 for t in tokens.tokens],
        "media": [[s, c.id, c.n_tokens, c.n_pos] for s, c in tokens.media()],
        "n_bytes": n_bytes,
        "sha256": sha256 if sha256 is not None else checksum(data),
        "documents": sorted(documents),
    }


def header_bytes(header: dict) -> bytes:
    """Everything in front of the state data; its length plus n_bytes is the file size."""
    return MAGIC + json.dumps(header).encode() + b"\n"


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


def read_header(f: BinaryIO, model: str) -> StateHeader:
    """Parse the header at the start of `f`, leaving `f` at the data. StateFileError if it is not
    a file of this format saved with this model."""
    if f.readline() != MAGIC:
        raise StateFileError("not a kvchat state file")
    try:
        header = json.loads(f.readline())
        if header.get("format") != FORMAT:
            raise StateFileError(f"format {header.get('format')}, expected {FORMAT}")
        if header.get("model") != model:
            raise StateFileError("saved with another model")
        return StateHeader(
            str(header["salt"]),
            _tokens_of(header),
            int(header["n_bytes"]),
            header["sha256"],
            frozenset(str(d) for d in header.get("documents", ())),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        if isinstance(e, StateFileError):
            raise
        raise StateFileError(f"bad header: {e}") from e


def load_header(path: Path, model: str) -> StateHeader:
    with path.open("rb") as f:
        return read_header(f, model)


def load(path: Path, model: str) -> tuple[StateHeader, bytes]:
    """Header and verified state data. StateFileError if foreign or damaged; OSError if
    unreadable (FileNotFoundError if missing)."""
    with path.open("rb") as f:
        header = read_header(f, model)
        data = f.read(header.n_bytes + 1)
    if len(data) != header.n_bytes or checksum(data) != header.sha256:
        raise StateFileError("the state data is damaged (size or checksum mismatch)")
    return header, data


def is_state_file(path: Path) -> bool:
    """Whether `path` is a regular file starting with our magic (of any model or format)."""
    try:
        if not path.is_file():  # first: opening a FIFO would block
            return False
        with path.open("rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def write(path: Path, head: bytes, data: bytes) -> int:
    """Write atomically: a temp file in the same directory, then os.replace, so a crash never
    leaves a half-written file under the name. Returns the bytes written."""
    # A hidden, unique temp name: concurrent writers never share one, and neither the disk
    # tier's glob nor a valid slot file name (no leading dot) can match it.
    fd, tmp = tempfile.mkstemp(prefix=".kvchat-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head)
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return len(head) + len(data)
