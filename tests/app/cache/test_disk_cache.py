from __future__ import annotations

import os
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


# --- the byte budget (--cache-disk) ---------------------------------------------------------------


def seq(i: int) -> TokenSequence:
    return TokenSequence([1000 + i, 1, 2, 3])  # distinct first tokens: no entry contains another


def files(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in directory.glob("*" + SUFFIX)}


def entry_size(tmp_path: Path, model_file: str) -> int:
    probe = DiskCache(tmp_path / "probe", model_file)
    probe.store("", seq(0), b"x" * 1000)
    probe.flush()
    return probe.total_bytes


def test_the_budget_is_never_exceeded(tmp_path: Path, model_file: str):
    size = entry_size(tmp_path, model_file)
    budget = 3 * size + size // 2  # room for three entries
    cache = DiskCache(tmp_path / "c", model_file, max_bytes=budget)
    for i in range(10):
        cache.store("", seq(i), b"x" * 1000)
        assert cache.total_bytes <= budget
        assert len(cache.entries) == min(i + 1, 3)
    cache.flush()
    on_disk = files(tmp_path / "c")
    assert sum(on_disk.values()) == cache.total_bytes <= budget  # accounting matches the files
    assert sorted(on_disk) == sorted(cache.entries)
    kept = [e.tokens for e in reopen(tmp_path / "c", model_file).entries.values()]
    assert sorted(t.tokens for t in kept) == [s.tokens for s in map(seq, (7, 8, 9))]


def test_eviction_is_least_recently_used_and_reads_count_as_use(tmp_path: Path, model_file: str):
    size = entry_size(tmp_path, model_file)
    cache = DiskCache(tmp_path / "c", model_file, max_bytes=3 * size)
    for i in range(3):
        cache.store("", seq(i), b"x" * 1000)
    cache.flush()
    cache = reopen(tmp_path / "c", model_file)  # a fresh writer; order now from mtimes
    cache.max_bytes = 3 * size
    assert cache.read(cache.best("", seq(0))[0]) == b"x" * 1000  # 0 is now the most recent
    cache.store("", seq(1), b"x" * 1000)  # already there: storing again counts as use too
    cache.store("", seq(3), b"x" * 1000)
    assert sorted(e.tokens.tokens for e in cache.entries.values()) == [
        seq(i).tokens for i in (0, 1, 3)
    ]


def test_the_order_survives_a_restart_through_mtimes(tmp_path: Path, model_file: str):
    size = entry_size(tmp_path, model_file)
    cache = DiskCache(tmp_path / "c", model_file)
    for i in range(3):
        cache.store("", seq(i), b"x" * 1000)
    cache.flush()
    for age, i in enumerate((2, 0, 1)):  # 2 oldest, then 0, then 1
        path = cache.best("", seq(i))[0].path
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    smaller = DiskCache(tmp_path / "c", model_file, max_bytes=2 * size)  # budget lowered
    assert sorted(e.tokens.tokens for e in smaller.entries.values()) == [
        seq(i).tokens for i in (0, 1)
    ]
    smaller.flush()
    assert len(files(tmp_path / "c")) == 2


def test_an_entry_larger_than_the_budget_is_not_written(tmp_path: Path, model_file: str):
    cache = DiskCache(tmp_path / "c", model_file, max_bytes=4000)
    cache.store("", seq(0), b"x" * 1000)
    cache.store("", TokenSequence([1000, 1, 2, 3, 4]), b"y" * 5000)  # would contain seq(0)
    cache.flush()
    assert [e.tokens for e in cache.entries.values()] == [seq(0)]  # and seq(0) was kept
    assert len(files(tmp_path / "c")) == 1


def test_no_budget_means_no_eviction(tmp_path: Path, model_file: str):
    cache = DiskCache(tmp_path / "c", model_file)
    for i in range(20):
        cache.store("", seq(i), b"x" * 1000)
    assert len(cache.entries) == 20
    cache.flush()


def test_forget_documents_deletes_their_files_also_after_a_reopen(tmp_path: Path, model_file: str):
    cache = DiskCache(tmp_path / "c", model_file)
    cache.store("", TokenSequence([1, 2, 3]), b"kept")
    cache.store("", TokenSequence([4, 5, 6]), b"gone", frozenset({"doc-x"}))
    cache.flush()
    again = reopen(tmp_path / "c", model_file)
    assert {e.documents for e in again.entries.values()} == {frozenset(), frozenset({"doc-x"})}
    assert again.forget_documents({"doc-x"}) == 1
    again.flush()
    assert again.best("", TokenSequence([4, 5, 6])) is None
    assert len(list((tmp_path / "c").glob("*" + SUFFIX))) == 1
    assert reopen(tmp_path / "c", model_file).best("", TokenSequence([4, 5, 6])) is None


def test_shared_replicas_find_each_others_entries_through_the_journal(
    tmp_path: Path, model_file: str
):
    directory = tmp_path / "shared"
    a = DiskCache(directory, model_file, journal="a")
    b = DiskCache(directory, model_file, journal="b")
    seq = TokenSequence([1, 2, 3, 4])
    a.store("salt", seq, b"state-of-a")
    a.flush()
    assert b.best("salt", seq) is None  # not looked for yet
    b.refresh_async().result()
    entry, n = b.best("salt", seq)
    assert n == len(seq) and b.read(entry) == b"state-of-a"
    assert b.best("other-salt", seq) is None  # the salt is part of the key


def test_a_shared_eviction_is_seen_by_the_other_replica(tmp_path: Path, model_file: str):
    directory = tmp_path / "shared"
    a = DiskCache(directory, model_file, journal="a")
    b = DiskCache(directory, model_file, journal="b")
    a.store("", TokenSequence([1, 2, 3]), b"x", documents=frozenset({"doc"}))
    (entry,) = a.entries.values()
    entry.written.result()  # written and journaled (a keeps its writer for the eviction)
    b.refresh_async().result()
    assert b.best("", TokenSequence([1, 2, 3])) is not None
    assert a.forget_documents({"doc"}) == 1
    a.flush()
    assert not list(directory.glob("*" + SUFFIX))  # in the trash, not deleted yet
    assert len(list((directory / "trash").iterdir())) == 1
    b.refresh_async().result()
    assert b.best("", TokenSequence([1, 2, 3])) is None


def test_a_shared_file_of_another_model_is_never_indexed(tmp_path: Path, model_file: str):
    directory = tmp_path / "shared"
    other_model = tmp_path / "other.gguf"
    other_model.write_bytes(b"other weights")
    a = DiskCache(directory, str(other_model), journal="a")
    b = DiskCache(directory, model_file, journal="b")
    a.store("", TokenSequence([1, 2, 3]), b"x")
    a.flush()
    b.refresh_async().result()
    assert b.best("", TokenSequence([1, 2, 3])) is None
