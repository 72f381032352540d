"""`DocumentError`: a document this library cannot take, with the reason in plain words."""

from __future__ import annotations


class DocumentError(ValueError):
    """Empty, corrupt, unsupported or oversized input. `too_large` lets HTTP answer 413."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.too_large = too_large
