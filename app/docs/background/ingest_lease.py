"""A replica's ingestion worker id, and `LeaseKeeper`: the lease on a claimed document renewed
while its worker is alive (app/db/replicas/ingest_claims.py).

A worker that dies (kill -9, a lost machine) stops renewing; once its lease has run out another
replica claims the document and ingests it from its stored text.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import threading
from pathlib import Path

from app.db.replicas.ingest_claims import IngestClaims

log = logging.getLogger(__name__)


def worker_id(data_dir: str | Path) -> str:
    """The same for every start of a server on this host and data directory (it takes its own
    claims back at once after a restart), different for every other replica."""
    where = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    return f"{socket.gethostname()[:100]}:{where}"


class LeaseKeeper:
    """`with LeaseKeeper(...)`: renews the lease every third of its length until the block
    ends; `lost` once a renewal found the claim taken over (the work is then discarded)."""

    def __init__(self, claims: IngestClaims, document_id: str, worker: str, lease_s: float) -> None:
        self.claims, self.document_id, self.worker = claims, document_id, worker
        self.lease_s = lease_s
        self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ingest-lease", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        # A third of the lease: two renewals may fail (a database hiccup) before it runs out.
        while not self._done.wait(self.lease_s / 3):
            try:
                held = self.claims.renew(self.document_id, self.worker, self.lease_s)
            except Exception:
                log.exception("could not renew the lease on %s", self.document_id)
                continue
            if not held:
                self.lost = True
                return
