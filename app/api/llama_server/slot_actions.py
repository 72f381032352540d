"""llama-server's slot actions: `POST /slots/{id}?action=save|restore|erase`, same shapes.

save copies a slot's KV, token list and salt into a file of the slot directory; restore puts them
back into a slot; erase clears a slot's KV. The work is the engine's (app/engine/kv/slot_files.py
holds the status choices); this checks the request and shapes the reply.

Bad action, slot id or file name: 400. Names follow llama.cpp's fs_validate_filename, plus no
leading dot (see app/cache/safe_filename.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.cache.safe_filename import path_in
from app.engine.request import RequestError

if TYPE_CHECKING:
    from app.engine.engine import Engine

ACTIONS = ("save", "restore", "erase")


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
        n_slots = self.engine.n_slots
        if not 0 <= id_slot < n_slots:
            raise RequestError(
                f"id_slot {id_slot} does not exist: this server has slots 0..{n_slots - 1}",
                param="id_slot",
            )
        if action == "erase":
            return {"id_slot": id_slot, "n_erased": await self.engine.erase_slot(id_slot)}
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
        saved = await self.engine.save_slot(id_slot, path)
        return {
            "id_slot": id_slot,
            "filename": filename,
            "n_saved": saved.n_saved,
            "n_written": saved.n_written,
            "timings": {"save_ms": _ms(start)},
        }

    async def restore(self, id_slot: int, filename: str, path: Path) -> dict:
        start = time.perf_counter()
        restored = await self.engine.restore_slot(id_slot, path)
        return {
            "id_slot": id_slot,
            "filename": filename,
            "n_restored": restored.n_restored,
            "n_read": restored.n_read,
            "timings": {"restore_ms": _ms(start)},
        }
