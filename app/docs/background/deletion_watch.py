"""`DeletionWatch`: this replica's caches drop the documents deleted on any replica.

The replica that takes a delete drops the document's KV at once (app/docs/intake/doc_removal.py);
every replica, that one included, also reads the deletion log (app/db/replicas/deletion_log.py)
every POLL_S and drops the KV of each document logged there from all its cache tiers
(`Engine.forget_documents`) and forgets its prefill. Until then a deleted document's KV can only
sit unused: retrieval reads chunks from the database, where the document is gone, so nothing asks
for it.

The log is read from its start when the replica starts: a document deleted while it was down
may still have KV in its disk tier. Dropping KV that is not there costs nothing.

After each page it handles, and every REPORT_S while there is none, the replica reports its
cursor and prunes the rows every live replica has applied (app/db/replicas/deletion_log.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from app.db.replicas.deletion_log import DeletionLog

log = logging.getLogger(__name__)

POLL_S = 1.0  # how soon another replica's delete reaches this one's caches
REPORT_S = 60.0  # how often an idle replica says it is alive (its cursor unchanged)
Forget = Callable[[set[str]], Awaitable[None]]


class DeletionWatch:
    def __init__(
        self,
        deletions: DeletionLog,
        forget: Forget,
        replica: str,
        window_s: float,
        poll_s: float = POLL_S,
    ) -> None:
        self.deletions, self.forget, self.poll_s = deletions, forget, poll_s
        self.replica, self.window_s = replica, window_s  # pruning: who, and who counts
        self.cursor = 0  # the largest log id handled
        self._reported: float | None = None  # when (monotonic) the cursor was last reported
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """On the event loop (the engine's async calls need it)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="deletion-watch")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            try:
                if await self.check():
                    continue  # a full page: more may be waiting
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is away: try again later
                log.exception("could not read the deletion log")
            await asyncio.sleep(self.poll_s)

    async def check(self) -> bool:
        """Handle the deletions logged since the last check; whether there were any."""
        rows = await asyncio.to_thread(self.deletions.after, self.cursor)
        if rows:
            await self.forget({document_id for _, document_id in rows})
            self.cursor = rows[-1][0]
        if rows or self._reported is None or time.monotonic() - self._reported >= REPORT_S:
            await asyncio.to_thread(self.report_and_prune)
        return bool(rows)

    def report_and_prune(self) -> None:
        self.deletions.report(self.replica, self.cursor)
        self._reported = time.monotonic()
        self.deletions.prune(self.window_s)
