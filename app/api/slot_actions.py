"""llama-server's slot actions: `POST /slots/{id}?action=save|restore|erase`, same shapes.

save copies a slot's KV, token list and salt into a file of the slot directory; restore puts
them back into a slot (any slot: the file is not tied to the slot it came from), so a following
request with that prefix is served from the KV; erase clears a slot's KV.

Status choices (llama-server differs where noted):
- bad action, slot id or file name: 400. Names follow llama.cpp's fs_validate_filename, plus no
  leading dot (see app/cache/safe_filename.py).
- slot busy with a request: 409 `slot_busy` (llama-server queues the action until the slot is
  idle; a client can retry, and a save never captures a half-computed prompt this way).
- save over an existing file that is not a slot save: 400, the file is left untouched.
- restore of a missing file: 404; of another model's, another format's or a damaged file: 400,
  and the slot is left unchanged (the file is read and checked before the KV is touched).
- the KV has no room for a restored state: 400, like llama-server; the slot is then empty (its
  previous KV went to the host cache first, as any replaced KV does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from app.cache import state_file
from app.cache.safe_filename import path_in
from app.cache.state_file import StateFileError, StateHeader
from app.engine.request import RequestError
from mm.token_sequence import TokenSequence

if TYPE_CHECKING:
    from app.engine.engine import Engine
    from app.engine.slot import Slot

ACTIONS = ("save", "restore", "erase")
T = TypeVar("T")


@dataclass(slots=True)
class SlotState:
    """A copy of what one slot's KV holds, taken on the engine thread."""

    salt: str
    tokens: TokenSequence
    data: bytes
    documents: frozenset[str] = frozenset()  # documents whose chunks the KV holds


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class SlotActions:
    def __init__(self, engine: Engine, directory: Path) -> None:
        self.engine = engine
        self.dir = directory

    async def run(self, action: str, id_slot: int, filename: str | None) -> dict:
        if action not in ACTIONS:
            raise RequestError(
                f"unknown action {action!r}: expected save, restore or erase", param="action"
            )
        n_slots = len(self.engine.scheduler.slots)
        if not 0 <= id_slot < n_slots:
            raise RequestError(
                f"id_slot {id_slot} does not exist: this server has slots 0..{n_slots - 1}",
                param="id_slot",
            )
        if action == "erase":
            return {"id_slot": id_slot, "n_erased": await self._on_engine(self._erase, id_slot)}
        if filename is None:
            raise RequestError(f"{action} needs a filename", param="filename")
        try:
            path = path_in(self.dir, filename)
        except ValueError as e:
            raise RequestError(str(e), param="filename") from e
        if action == "save":
            return await self.save(id_slot, filename, path)
        return await self.restore(id_slot, filename, path)

    async def save(self, id_slot: int, filename: str, path: Path) -> dict:
        start = time.perf_counter()
        state = await self._on_engine(self._snapshot, id_slot)
        n_written = await asyncio.to_thread(self._write, path, state)
        return {
            "id_slot": id_slot,
            "filename": filename,
            "n_saved": len(state.tokens),
            "n_written": n_written,
            "timings": {"save_ms": _ms(start)},
        }

    async def restore(self, id_slot: int, filename: str, path: Path) -> dict:
        start = time.perf_counter()
        header, data, n_read = await asyncio.to_thread(self._read, path, filename)
        await self._on_engine(self._load, id_slot, header, data)
        return {
            "id_slot": id_slot,
            "filename": filename,
            "n_restored": len(header.tokens),
            "n_read": n_read,
            "timings": {"restore_ms": _ms(start)},
        }

    async def _on_engine(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.wrap_future(self.engine.call(lambda: fn(*args)))

    # --- file I/O (worker thread) ---------------------------------------------------------------

    def _write(self, path: Path, state: SlotState) -> int:
        if path.exists() and not state_file.is_state_file(path):
            raise RequestError(
                f"{path.name!r} would overwrite a file that is not a slot save", param="filename"
            )
        model = state_file.cached_fingerprint(self.engine.model.path)
        head = state_file.header_bytes(
            state_file.encode_header(
                state.salt, state.tokens, state.data, model, documents=state.documents
            )
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return state_file.write(path, head, state.data)
        except OSError as e:
            raise RequestError(
                f"could not write {path.name!r}: {e.strerror or e}", code="server_error", status=500
            ) from e

    def _read(self, path: Path, filename: str) -> tuple[StateHeader, bytes, int]:
        model = state_file.cached_fingerprint(self.engine.model.path)
        try:
            header, data = state_file.load(path, model)
            return header, data, path.stat().st_size
        except FileNotFoundError as e:
            raise RequestError(
                f"no slot save named {filename!r}", param="filename", code="not_found", status=404
            ) from e
        except StateFileError as e:
            raise RequestError(f"{filename!r} cannot be restored: {e}", param="filename") from e
        except OSError as e:  # a directory, no permission, ...
            raise RequestError(
                f"{filename!r} cannot be read: {e.strerror or e}", param="filename"
            ) from e

    # --- engine thread --------------------------------------------------------------------------

    def _idle_slot(self, id_slot: int) -> Slot:
        slot = self.engine.scheduler.slots[id_slot]
        if not slot.idle:
            raise RequestError(
                f"slot {id_slot} is processing a request; retry when it is idle",
                param="id_slot",
                code="slot_busy",
                status=409,
            )
        return slot

    def _snapshot(self, id_slot: int) -> SlotState:
        slot = self._idle_slot(id_slot)
        data = self.engine.model.state_save(slot.id)
        return SlotState(slot.salt, slot.cache.copy(), data, slot.documents)

    def _load(self, id_slot: int, header: StateHeader, data: bytes) -> None:
        slot = self._idle_slot(id_slot)
        model, tokens = self.engine.model, header.tokens
        # Same model fingerprint, so these hold unless the file was crafted: check anyway, a bad
        # token list would make every later prefix match lie about the KV.
        try:
            tokens.validate(model.n_vocab)
        except ValueError as e:
            raise RequestError(f"the saved token list is invalid: {e}", param="filename") from e
        if tokens.n_pos >= model.n_ctx:
            raise RequestError(
                f"the save holds {tokens.n_pos} positions; the context has {model.n_ctx}",
                param="filename",
            )
        self.engine.reuse.save(slot, keep=0)  # what the slot holds now is not thrown away
        slot.erase(model)
        # A state whose positions disagree with its token list would break the Slot invariant.
        if not model.state_restore(slot.id, data) or model.seq_pos_max(slot.id) != tokens.n_pos - 1:
            slot.erase(model)
            raise RequestError(
                "unable to restore the slot: no room in the KV cache, or the state does not fit "
                "this context",
                param="filename",
            )
        slot.cache = tokens
        slot.salt = header.salt
        slot.documents = header.documents  # a deleted document's KV is erased before reuse
        slot.last_used = time.monotonic()  # just asked for: not the first slot to give away

    def _erase(self, id_slot: int) -> int:
        slot = self._idle_slot(id_slot)
        n = len(slot.cache)
        slot.erase(self.engine.model)
        return n
