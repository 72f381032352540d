from __future__ import annotations

import os
from pathlib import Path

from app.cache import disk_journal
from app.cache.disk_journal import DiskJournal, journal_name


def test_a_replica_reads_what_the_others_journaled_once(tmp_path: Path):
    a, b = DiskJournal(tmp_path, "host:8081"), DiskJournal(tmp_path, "host:8082")
    a.wrote("x.kvstate")
    a.wrote("y.kvstate")
    news = b.news()
    assert news.added == ["x.kvstate", "y.kvstate"] and news.removed == []
    assert b.news().added == []  # read once
    assert a.news().added == []  # its own lines are not news to it


def test_a_half_written_line_waits_for_its_end(tmp_path: Path):
    a, b = DiskJournal(tmp_path, "a"), DiskJournal(tmp_path, "b")
    with a.own.open("ab") as f:
        f.write(b"+ x.kv")
    assert b.news().added == []
    with a.own.open("ab") as f:
        f.write(b"state\n")
    assert b.news().added == ["x.kvstate"]


def test_lines_written_before_a_replica_starts_are_not_news(tmp_path: Path):
    DiskJournal(tmp_path, "a").wrote("old.kvstate")  # the new replica's scan finds the file
    b = DiskJournal(tmp_path, "b")
    assert b.news().added == []


def test_a_restarted_replica_starts_a_new_journal_read_from_its_start(tmp_path: Path):
    a, b = DiskJournal(tmp_path, "a"), DiskJournal(tmp_path, "b")
    a.wrote("x.kvstate")
    assert b.news().added == ["x.kvstate"]
    again = DiskJournal(tmp_path, "a")  # restart: an empty journal of another inode
    again.wrote("z.kvstate")
    assert b.news().added == ["z.kvstate"]


def test_discard_moves_to_the_trash_and_journals_it(tmp_path: Path):
    a, b = DiskJournal(tmp_path, "a"), DiskJournal(tmp_path, "b")
    path = tmp_path / "x.kvstate"
    path.write_bytes(b"state")
    with path.open("rb") as reader:  # opened before the eviction: still reads it whole
        a.discard(path)
        assert reader.read() == b"state"
    assert not path.exists() and (tmp_path / "trash" / "x.kvstate").exists()
    assert b.news().removed == ["x.kvstate"]
    a.discard(path)  # gone already: only journaled again


def test_trash_is_emptied_after_the_grace_period(tmp_path: Path, monkeypatch):
    a = DiskJournal(tmp_path, "a")
    old = tmp_path / "trash" / "old.kvstate"
    old.write_bytes(b"s")
    past = old.stat().st_mtime - disk_journal.TRASH_GRACE_S - 1
    os.utime(old, (past, past))
    (tmp_path / "new.kvstate").write_bytes(b"s")
    a.discard(tmp_path / "new.kvstate")
    assert not old.exists() and (tmp_path / "trash" / "new.kvstate").exists()


def test_a_long_journal_starts_afresh(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(disk_journal, "MAX_JOURNAL_BYTES", 40)
    a, b = DiskJournal(tmp_path, "a"), DiskJournal(tmp_path, "b")
    for i in range(4):
        a.wrote(f"{i}.kvstate")
    assert a.own.stat().st_size <= 40
    b.news()
    a.wrote("last.kvstate")
    assert b.news().added[-1:] == ["last.kvstate"]


def test_journal_names_are_plain_file_names():
    assert journal_name("host:8081") == "host_8081"
    assert journal_name("../etc/x") == "_etc_x"
    assert journal_name("") == "replica"
