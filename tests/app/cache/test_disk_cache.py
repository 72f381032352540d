from __future__ import annotations

from pathlib import Path

import pytest

from app.cache.disk_cache import SUFFIX, DiskCache
from mm.token_sequence import MediaChunk, TokenSequence


@pytest.fixture()
def model_file(tmp_path: Path) -> str:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"weights" * 1000)
    return str(path)


def reopen(directory: Path, model: str) -> DiskCache:
    return DiskCache(directory, model)


def test_entries_survive_a_reopen_with_media_and_salt(tmp_path: Path, model_file: str):
    seq = TokenSequence([5, 6])
    seq.add_media(MediaChunk("img", 3, 3))
    seq.extend([7, 8])
    cache = DiskCache(tmp_path / "c", model_file)
    cache.store("tenant", seq, b"state-bytes")
    cache.flush()
    again = reopen(tmp_path / "c", model_file)
    entry, n = again.best("tenant", seq)
    assert n == len(seq) and entry.tokens == seq
    assert again.read(entry) == b"state-bytes"
    assert again.best("", seq) is None  # salts isolate on disk too


def test_foreign_corrupt_and_damaged_files_are_skipped(tmp_path: Path, model_file: str):
    directory = tmp_path / "c"
    cache = DiskCache(directory, model_file)
    cache.store("", TokenSequence([1, 2, 3]), b"good")
    cache.flush()
    (directory / ("garbage" + SUFFIX)).write_bytes(b"\x00\x01 not a state")
    other_model = tmp_path / "other.gguf"
    other_model.write_bytes(b"different" * 1000)
    assert reopen(directory, str(other_model)).entries == {}  # another model: nothing loads
    again = reopen(directory, model_file)
    assert len(again.entries) == 1  # the garbage file was skipped
    entry = next(iter(again.entries.values()))
    entry.path.write_bytes(entry.path.read_bytes()[:-2] + b"XX")  # damage the data
    assert again.read(entry) is None and again.entries == {}


def test_a_contained_entry_is_replaced_by_the_longer_one(tmp_path: Path, model_file: str):
    cache = DiskCache(tmp_path / "c", model_file)
    cache.store("", TokenSequence([1, 2]), b"short")
    cache.store("", TokenSequence([1, 2, 3]), b"long")
    cache.flush()
    assert [e.tokens for e in reopen(tmp_path / "c", model_file).entries.values()] == [
        TokenSequence([1, 2, 3])
    ]
