"""`UploadsInFlight`: how many document uploads are being taken in right now.

An upload is a client waiting on this server: while one is parsed and stored, the ingestion
worker embeds on one thread instead of every core it may use (app/docs/background/ingestor.py's
`engine_busy`), so the upload answers at once and documents sent one after another arrive (and
are ingested) sooner. Entered on the event loop, read from the worker thread: a read of an int
needs no lock.
"""

from __future__ import annotations

from types import TracebackType


class UploadsInFlight:
    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> UploadsInFlight:
        self.count += 1
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.count -= 1

    def __bool__(self) -> bool:
        return self.count > 0
