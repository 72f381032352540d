"""`SlotFiles` (the engine's slot save/restore/erase) over fakes of the model, slots and host
cache, driven through `SlotActions` (the HTTP adapter): the status choices and what a slot holds
afterwards."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from pathlib import Path

import pytest

from app.api.llama_server.slot_actions import SlotActions
from app.cache import state_file
from app.engine.core.slot import Slot
from app.engine.kv.slot_files import SlotFiles
from app.engine.request import RequestError
from mm.token_sequence import TokenSequence


class FakeModel:
    n_vocab = 1000
    n_ctx = 512

    def __init__(self, path: str) -> None:
        self.path = path
        self.kv: dict[int, bytes] = {}  # seq id -> "state": the token ids, one byte each
        self.fail_restore = False

    def state_save(self, seq_id: int) -> bytes:
        return self.kv.get(seq_id, b"")

    def state_restore(self, seq_id: int, data: bytes) -> bool:
        if self.fail_restore:
            return False
        self.kv[seq_id] = data
        return True

    def seq_pos_max(self, seq_id: int) -> int:
        return len(self.kv.get(seq_id, b"")) - 1

    def seq_clear(self, seq_id: int) -> None:
        self.kv.pop(seq_id, None)


class FakeReuse:
    def __init__(self) -> None:
        self.saved: list[TokenSequence] = []

    def save(self, slot: Slot, keep: int) -> None:
        self.saved.append(slot.cache.copy())

    def unpark(self, slot: Slot) -> None:
        """No host memory here: a parked slot's KV cannot come back (the real path's test is
        tests/app/api/llama_server/test_slot_actions.py)."""


class FakeScheduler:
    def __init__(self) -> None:
        self.slots = [Slot(0), Slot(1)]


class FakeEngine:
    """`Engine`'s slot methods over the real `SlotFiles` and fakes of its parts."""

    def __init__(self, model_path: str) -> None:
        self.model = FakeModel(model_path)
        self.scheduler = FakeScheduler()
        self.reuse = FakeReuse()
        files = SlotFiles(self.model, self.scheduler.slots, self.reuse, self.call)  # type: ignore[arg-type]
        self.n_slots = len(self.scheduler.slots)
        self.save_slot, self.restore_slot, self.erase_slot = files.save, files.restore, files.erase

    def call(self, fn) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn())
        except Exception as e:
            future.set_exception(e)
        return future

    def fill(self, slot_id: int, tokens: list[int], salt: str = "") -> None:
        slot = self.scheduler.slots[slot_id]
        slot.cache, slot.salt = TokenSequence(tokens), salt
        self.model.kv[slot_id] = bytes(tokens)


@pytest.fixture()
def engine(tmp_path: Path) -> FakeEngine:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights" * 100)
    return FakeEngine(str(model))


@pytest.fixture()
def actions(engine: FakeEngine, tmp_path: Path) -> SlotActions:
    return SlotActions(engine, tmp_path / "slots")  # type: ignore[arg-type]


def run(actions: SlotActions, action: str, id_slot: int, filename: str | None = None) -> dict:
    return asyncio.run(actions.run(action, id_slot, filename))


def refused(actions: SlotActions, *args) -> RequestError:
    with pytest.raises(RequestError) as info:
        run(actions, *args)
    return info.value


def test_save_restore_into_another_slot_keeps_tokens_salt_and_kv(engine, actions, tmp_path):
    engine.fill(0, [5, 6, 7], salt="tenant")
    saved = run(actions, "save", 0, "s.bin")
    assert saved["n_saved"] == 3 and saved["filename"] == "s.bin" and saved["id_slot"] == 0
    assert saved["n_written"] == (tmp_path / "slots" / "s.bin").stat().st_size
    assert "save_ms" in saved["timings"]
    engine.fill(1, [9] * 4)
    restored = run(actions, "restore", 1, "s.bin")
    assert restored["n_restored"] == 3 and restored["n_read"] == saved["n_written"]
    slot = engine.scheduler.slots[1]
    assert slot.cache == TokenSequence([5, 6, 7]) and slot.salt == "tenant"
    assert engine.model.kv[1] == bytes([5, 6, 7]) and slot.last_used > 0
    assert engine.reuse.saved == [TokenSequence([9] * 4)]  # the replaced KV went to host memory
    assert run(actions, "erase", 1) == {"id_slot": 1, "n_erased": 3}
    assert len(slot.cache) == 0 and slot.salt == "" and 1 not in engine.model.kv


@pytest.mark.parametrize("action", ["save", "restore", "erase"])
def test_a_busy_slot_is_409(engine, actions, action):
    engine.fill(0, [1, 2])
    run(actions, "save", 0, "s.bin")
    engine.scheduler.slots[0].task = object()  # type: ignore[assignment]
    error = refused(actions, action, 0, "s.bin")
    assert (error.status, error.code, error.param) == (409, "slot_busy", "id_slot")
    assert engine.model.kv[0] == bytes([1, 2])


def test_bad_requests_are_400(actions):
    assert refused(actions, "load", 0, "s.bin").param == "action"
    assert refused(actions, "save", 2, "s.bin").param == "id_slot"
    assert refused(actions, "erase", -1).param == "id_slot"
    assert refused(actions, "save", 0, None).param == "filename"
    assert refused(actions, "save", 0, "../s.bin").status == 400


def test_restore_of_a_missing_file_is_404(actions):
    assert refused(actions, "restore", 0, "nothing.bin").status == 404


def test_a_foreign_or_damaged_file_leaves_the_slot_alone(engine, actions, tmp_path):
    engine.fill(0, [1, 2, 3])
    run(actions, "save", 0, "s.bin")
    path = tmp_path / "slots" / "s.bin"
    good = path.read_bytes()
    path.write_bytes(good[:-1] + b"X")
    engine.fill(0, [4, 5])
    assert "damaged" in refused(actions, "restore", 0, "s.bin").message
    head = state_file.encode_header("", TokenSequence([1]), b"\x01", "another model")
    path.write_bytes(state_file.header_bytes(head) + b"\x01")
    assert "another model" in refused(actions, "restore", 0, "s.bin").message
    assert engine.scheduler.slots[0].cache == TokenSequence([4, 5])
    assert engine.model.kv[0] == bytes([4, 5]) and engine.reuse.saved == []


def test_a_failed_restore_leaves_the_slot_empty_not_inconsistent(engine, actions):
    engine.fill(0, [1, 2, 3])
    run(actions, "save", 0, "s.bin")
    engine.model.fail_restore = True
    assert refused(actions, "restore", 0, "s.bin").status == 400
    assert len(engine.scheduler.slots[0].cache) == 0 and 0 not in engine.model.kv


def test_save_overwrites_only_slot_saves(engine, actions, tmp_path):
    directory = tmp_path / "slots"
    directory.mkdir()
    (directory / "notes.txt").write_bytes(b"keep me")
    engine.fill(0, [1, 2])
    error = refused(actions, "save", 0, "notes.txt")
    assert "not a slot save" in error.message
    assert (directory / "notes.txt").read_bytes() == b"keep me"
    run(actions, "save", 0, "s.bin")
    engine.fill(0, [3, 4, 5])
    assert run(actions, "save", 0, "s.bin")["n_saved"] == 3  # our own file: replaced
    assert sorted(p.name for p in directory.iterdir()) == ["notes.txt", "s.bin"]


def test_a_slot_save_keeps_the_documents_its_kv_holds(engine, actions):
    engine.fill(0, [5, 6, 7])
    engine.scheduler.slots[0].documents = frozenset({"doc-a"})
    run(actions, "save", 0, "d.bin")
    run(actions, "restore", 1, "d.bin")
    assert engine.scheduler.slots[1].documents == frozenset({"doc-a"})
