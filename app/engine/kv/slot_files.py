"""`SlotFiles`: a slot's KV, token list and salt saved to a file, restored into a slot, erased.

The engine's side of llama-server's slot actions (`POST /slots/{id}?action=save|restore|erase`,
app/api/llama_server/slot_actions.py): `Engine.save_slot`, `restore_slot` and `erase_slot` call
these. A file is not tied to the slot it came from: a restore puts it into any slot, so a following
request with that prefix is served from the KV.

- a slot busy with a request: 409 `slot_busy` (llama-server queues the action until the slot is
  idle; a client can retry, and a save never captures a half-computed prompt this way).
- save over an existing file that is not a slot save: 400, the file is left untouched.
- restore of a missing file: 404; of another model's, another format's or a damaged file: 400,
  and the slot is left unchanged (the file is read and checked before the KV is touched).
- the KV has no room for a restored state: 400, like llama-server; the slot is then empty (its
  previous KV went to the host cache first, as any replaced KV does).

Slots and the KV are touched on the engine thread only (through `call`); files are read and
written on a worker thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.cache import state_file
from app.cache.state_file import StateFileError, StateHeader
from app.engine.core.slot import Slot
from app.engine.request import RequestError
from mm.token_sequence import TokenSequence

if TYPE_CHECKING:
    from app.engine.kv.prefix_reuse import PrefixReuse
    from app.engine.llama.model import Model

T = TypeVar("T")


@dataclass(slots=True)
class SlotState:
    """A copy of what one slot's KV holds, taken on the engine thread."""

    salt: str
    tokens: TokenSequence
    data: bytes
    documents: frozenset[str] = frozenset()  # documents whose chunks the KV holds


@dataclass(slots=True)
class SlotSaved:
    n_saved: int  # tokens
    n_written: int  # bytes of the file


@dataclass(slots=True)
class SlotRestored:
    n_restored: int  # tokens
    n_read: int  # bytes of the file


class SlotFiles:
    def __init__(
        self,
        model: Model,
        slots: list[Slot],
        reuse: PrefixReuse,
        call: Callable[[Callable[[], Any]], Future],
    ) -> None:
        self.model = model
        self.slots = slots
        self.reuse = reuse  # a restore's replaced KV goes to the host cache first
        self._call = call  # runs a function on the engine thread between steps

    async def save(self, id_slot: int, path: Path) -> SlotSaved:
        state = await self._on_engine(self._snapshot, id_slot)
        n_written = await asyncio.to_thread(self._write, path, state)
        return SlotSaved(len(state.tokens), n_written)

    async def restore(self, id_slot: int, path: Path) -> SlotRestored:
        header, data, n_read = await asyncio.to_thread(self._read, path)
        await self._on_engine(self._load, id_slot, header, data)
        return SlotRestored(len(header.tokens), n_read)

    async def erase(self, id_slot: int) -> int:
        """Tokens the slot held."""
        return await self._on_engine(self._erase, id_slot)

    async def _on_engine(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.wrap_future(self._call(lambda: fn(*args)))

    # --- file I/O (worker thread) ---------------------------------------------------------------

    def _write(self, path: Path, state: SlotState) -> int:
        if path.exists() and not state_file.is_state_file(path):
            raise RequestError(
                f"{path.name!r} would overwrite a file that is not a slot save", param="filename"
            )
        model = state_file.cached_fingerprint(self.model.path)
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

    def _read(self, path: Path) -> tuple[StateHeader, bytes, int]:
        model, filename = state_file.cached_fingerprint(self.model.path), path.name
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
        slot = self.slots[id_slot]
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
        self.reuse.unpark(slot)  # an idle slot's KV may be in host memory (--cache-idle-slots)
        data = self.model.state_save(slot.id)
        return SlotState(slot.salt, slot.cache.copy(), data, slot.documents)

    def _load(self, id_slot: int, header: StateHeader, data: bytes) -> None:
        slot = self._idle_slot(id_slot)
        model, tokens = self.model, header.tokens
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
        self.reuse.save(slot, keep=0)  # what the slot holds now is not thrown away
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
        slot.erase(self.model)
        return n
