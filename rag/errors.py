"""`DocumentError`: a document this library cannot take, with the reason in plain words;
`OcrError`: a page OCR could not read."""

from __future__ import annotations


class DocumentError(ValueError):
    """Empty, corrupt, unsupported or oversized input. `too_large` lets HTTP answer 413."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.too_large = too_large


class OcrError(RuntimeError):
    """One page that OCR could not read: the engine failed, was missing or ran out of time
    (`timed_out`)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.timed_out = timed_out
